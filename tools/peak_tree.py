#!/usr/bin/env python3
"""Run a command; print its wall time and the peak memory of its whole process tree.

    tools/peak_tree.py make test
    tools/peak_tree.py --json make verify

``/usr/bin/time -v`` reports the largest single process; ``make test`` runs
two pytest-xdist workers and their children side by side, so what a laptop
must hold is their sum. This samples the resident memory (``/proc/PID/statm``)
of every process descended from the command every ``--every`` seconds and
keeps the largest sum. Linux only. The command's exit status is this
script's own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    """Each process's children, from /proc (a process that ends while read is skipped)."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])  # the name may hold spaces and parentheses
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def tree_rss(root: int) -> int:
    """Bytes resident in ``root`` and all its descendants now."""
    tree, total, todo = _children(), 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(tree.get(pid, ()))
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.25, help="seconds between samples (default 0.25)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    args = parser.parse_args()
    if not args.command:
        parser.error("give a command to run")
    started = time.monotonic()
    process = subprocess.Popen(args.command)
    peak = 0
    while process.poll() is None:
        peak = max(peak, tree_rss(process.pid))
        time.sleep(args.every)
    seconds = time.monotonic() - started
    figures = {"command": " ".join(args.command), "exit": process.returncode, "seconds": round(seconds, 1)}
    figures["peak_tree_bytes"] = peak
    if args.json:
        print(json.dumps(figures), file=sys.stderr)
    else:
        print(
            f"peak_tree: {' '.join(args.command)}: exit {process.returncode}, {seconds / 60:.1f} min, "
            f"peak {peak / 1e9:.2f} GB for the whole process tree",
            file=sys.stderr,
        )
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
