"""Run ``auxspec verify`` on every subtle buggy port and every correct
rewrite, at the given seeds, and print a markdown table.

    nice -n 10 .venv/bin/python tests/ports/subtle/measure.py --seeds 1 2 3 --max-time 60 --out table.md

One port at a time (each verify run has the machine to itself). A buggy
port should be flagged (exit 1); a rewrite should conform (exit 0). Each
port file names its ``DIMENSION``, ``PROFILE`` (the ``--profile`` it is held
to) and ``DRIVE`` (``python``: verify loads the file; ``exec``: verify
drives ``auxspec serve FILE`` over the port protocol).
"""

from __future__ import annotations

import argparse
import ast
import json
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
REWRITES = HERE.parent / "rewrites"
AUXSPEC = ROOT / ".venv" / "bin" / "auxspec"
NOT_PORTS = {"measure.py"}


@dataclass
class Port:
    path: Path
    kind: str  # "buggy" or "rewrite"
    dimension: str
    profile: str
    drive: str
    snapshot: str
    results: dict[int, tuple[str, float]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.stem


def _constants(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def discover() -> list[Port]:
    ports: list[Port] = []
    for kind, folder in (("buggy", HERE), ("rewrite", REWRITES)):
        for path in sorted(folder.glob("*.py")):
            if path.name.startswith("_") or path.name in NOT_PORTS:
                continue
            meta = _constants(path)
            ports.append(
                Port(
                    path,
                    kind,
                    meta.get("DIMENSION", "?"),
                    meta.get("PROFILE", "strict"),
                    meta.get("DRIVE", "python"),
                    meta.get("SNAPSHOT", ""),
                )
            )
    return ports


def command(port: Port, seed: int, max_time: float, out: Path) -> list[str]:
    # A port process gets 30 s per op rather than 5: on a loaded machine the
    # first answer (the process starting up) can take longer than 5 s.
    exec_args = ["--exec", f"{shlex.quote(str(AUXSPEC))} serve {shlex.quote(str(port.path))}", "--op-timeout", "30"]
    target = exec_args if port.drive == "exec" else [str(port.path)]
    return [
        str(AUXSPEC),
        "verify",
        *target,
        "--profile",
        port.profile,
        "--max-time",
        str(max_time),
        "--seed",
        str(seed),
        "--json",
        "--out",
        str(out),
        "--large-stores",  # their bugs show in small stores; the large-store phase has its own ports
        "off",
    ]


def run(port: Port, seed: int, max_time: float, slack: float) -> tuple[str, float]:
    """(result, seconds): result is flagged / conforms / error rc=N / timeout."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        try:
            done = subprocess.run(
                command(port, seed, max_time, Path(tmp) / "divergence.jsonl"),
                capture_output=True,
                text=True,
                timeout=max_time + slack,
                cwd=ROOT,
            )
        except subprocess.TimeoutExpired:
            return "timeout", time.monotonic() - started
        elapsed = time.monotonic() - started
    if done.returncode == 1:
        return "flagged", elapsed
    if done.returncode == 0:
        return "conforms", elapsed
    tail = (done.stderr.strip().splitlines() or ["?"])[-1][:80]
    return f"error rc={done.returncode}: {tail}", elapsed


def table(ports: list[Port], seeds: list[int], max_time: float) -> str:
    head = f"`auxspec verify --max-time {max_time:g}`, seeds {', '.join(map(str, seeds))}"
    out = [f"### Buggy ports ({head}); want: flagged", ""]
    cols = " | ".join(f"seed {s}" for s in seeds)
    out += [f"| port | dimension | profile | drive | {cols} |", "|" + " --- |" * (4 + len(seeds))]
    buggy = [p for p in ports if p.kind == "buggy"]
    for p in buggy:
        cells = " | ".join(_cell(p, s) for s in seeds)
        out.append(f"| {p.name} | {p.dimension} | {p.profile} | {p.drive} | {cells} |")
    for seed in seeds:
        ran = [p for p in buggy if seed in p.results]
        missed = [p for p in ran if p.results[seed][0] != "flagged"]
        out.append("")
        out.append(f"Seed {seed}: {len(missed)} of {len(ran)} buggy ports missed (not flagged).")
    rewrites = [p for p in ports if p.kind == "rewrite"]
    if rewrites:
        out += ["", f"### Correct rewrites ({head}); want: conforms", ""]
        out += [f"| port | profile | drive | {cols} | snapshot vs spec |", "|" + " --- |" * (4 + len(seeds))]
        for p in rewrites:
            cells = " | ".join(_cell(p, s) for s in seeds)
            out.append(f"| {p.name} | {p.profile} | {p.drive} | {cells} | {p.snapshot} |")
    return "\n".join(out) + "\n"


def _cell(port: Port, seed: int) -> str:
    if seed not in port.results:
        return "not run"
    result, seconds = port.results[seed]
    if port.kind == "buggy":
        word = "**flagged**" if result == "flagged" else ("missed" if result == "conforms" else result)
    else:
        word = "conforms" if result == "conforms" else ("**flagged**" if result == "flagged" else result)
    return f"{word} {seconds:.0f} s"


def render(ports: list[Port], logs: list[Path], max_time: float) -> int:
    by_name = {p.name: p for p in ports}
    seeds: set[int] = set()
    for path in logs:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["port"] in by_name:
                by_name[row["port"]].results[row["seed"]] = (row["result"], row["seconds"])
                seeds.add(row["seed"])
    print(table(ports, sorted(seeds), max_time), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--max-time", type=float, default=60)
    parser.add_argument("--slack", type=float, default=240, help="seconds allowed beyond --max-time per run")
    parser.add_argument("--only", nargs="*", default=None, help="port names (file stems) to run")
    parser.add_argument("--kind", choices=("buggy", "rewrite"), help="run only the buggy ports or only the rewrites")
    parser.add_argument("--out", type=Path, help="also write the table here (rewritten after every run)")
    parser.add_argument("--log", type=Path, help="append each result to this JSON Lines file")
    parser.add_argument(
        "--drive",
        choices=("file", "exec"),
        default="file",
        help="exec: drive every port through --exec 'auxspec serve PORT' (the pipelined protocol), "
        "not only those whose DRIVE says so (issue 32: what a port in another language gets)",
    )
    parser.add_argument(
        "--render",
        type=Path,
        nargs="+",
        help="run nothing: print the table of results in these --log files (the last result per port and seed wins)",
    )
    args = parser.parse_args(argv)
    ports = discover()
    if args.render:
        return render(ports, args.render, args.max_time)
    if args.kind:
        ports = [p for p in ports if p.kind == args.kind]
    if args.only:
        ports = [p for p in ports if p.name in set(args.only)]
    if args.drive == "exec":
        for port in ports:
            port.drive = "exec"
    for port in ports:
        for seed in args.seeds:
            port.results[seed] = run(port, seed, args.max_time, args.slack)
            result, seconds = port.results[seed]
            print(f"{port.name} seed {seed}: {result} in {seconds:.1f} s", file=sys.stderr, flush=True)
            if args.log:
                with args.log.open("a") as log:
                    row = {"port": port.name, "seed": seed, "result": result, "seconds": seconds}
                    log.write(json.dumps(row) + "\n")
            if args.out:
                args.out.write_text(table(ports, args.seeds, args.max_time))
    print(table(ports, args.seeds, args.max_time), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
