"""The verifier's own mutation score: each mutant of impl/auxstore run as a
port through ``auxspec verify``.

Each mutant is applied to a copy of the package renamed ``auxstore_mut`` (in
a temporary folder put on ``PYTHONPATH``), and ``auxspec verify auxstore_mut
--max-time 10 --seed 0`` is run on it as on any port module: the sequential
store and, since the module has one, the background store. Exit 1 (a
divergence) is *flagged*; exit 0 is *survived*; exit 2 (the target could not
be loaded) is *error*; a run past the wall limit (a mutant that loops) is
*timeout*, which verify itself did not report and so is not counted as
flagged.

    nice -n 10 .venv/bin/python tools/mutation/verify_mutants.py            # every mutant
    nice -n 10 .venv/bin/python tools/mutation/verify_mutants.py --sample 40 --seed 1

Results go to ``build/mutation/verify-results.jsonl`` (one JSON object per
mutant) and a summary per module is printed; with ``--floor P`` the exit
status is 1 when fewer than P% of the mutants run are flagged.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.mutation import common

PACKAGE = "auxstore_mut"
_IMPORT = re.compile(r"^(\s*(?:from|import)\s+)auxstore(?=[.\s])", re.MULTILINE)


def port_package(folder: Path, relative: str | None = None, source: str | None = None) -> Path:
    """``folder/auxstore_mut``: the store package under another name, with
    ``source`` as its file ``relative`` (``auxstore/_store.py``) when given."""
    package = folder / PACKAGE
    shutil.copytree(common.REPO / "impl" / "auxstore", package, ignore=shutil.ignore_patterns("__pycache__"))
    if relative is not None and source is not None:
        (package / Path(relative).relative_to("auxstore")).write_text(source)
    for path in package.glob("*.py"):
        path.write_text(_IMPORT.sub(rf"\g<1>{PACKAGE}", path.read_text()))
    return package


def run_verify(
    folder: Path, max_time: float, seed: int, wall: float, large_stores: str = "auto"
) -> tuple[str, float, str]:
    """Verify the package in ``folder``: (status, seconds, last lines of its output)."""
    auxspec = Path(sys.executable).parent / "auxspec"
    command = [str(auxspec), "verify", PACKAGE, "--max-time", str(max_time), "--seed", str(seed)]
    command += ["--large-stores", large_stores]
    command += ["--out", str(folder / "divergence.jsonl")]
    # The package first; a PYTHONPATH already set (a frozen copy of the spec, say) stays after it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(folder), os.environ.get("PYTHONPATH"))))}
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=wall)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - started, ""
    seconds = time.monotonic() - started
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-6:])
    status = {0: "survived", 1: "flagged", 2: "error"}.get(done.returncode, f"exit {done.returncode}")
    return status, seconds, tail


def check_one(
    name: str, root: Path, max_time: float, seed: int, wall: float, large_stores: str = "auto"
) -> dict[str, object]:
    relative, source = common.mutated_source(name, root)
    with tempfile.TemporaryDirectory(prefix="auxmut-") as tmp:
        port_package(Path(tmp), relative, source)
        status, seconds, tail = run_verify(Path(tmp), max_time, seed, wall, large_stores)
    return {
        "mutant": name,
        "module": common.module_of(name),
        "status": status,
        "seconds": round(seconds, 1),
        "tail": tail,
    }


def summarize(results: Sequence[dict[str, object]]) -> dict[str, Counter[str]]:
    per_module: dict[str, Counter[str]] = {}
    for result in results:
        per_module.setdefault(str(result["module"]), Counter())[str(result["status"])] += 1
    return per_module


def score(counts: Counter[str]) -> float:
    total = sum(counts.values())
    return 100.0 * counts["flagged"] / total if total else 100.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, help="run this many mutants, drawn by --seed (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--mutant", action="append", help="run these mutants by name instead of a sample")
    parser.add_argument("--max-time", type=float, default=10.0, help="verify's --max-time (default 10)")
    parser.add_argument("--verify-seed", type=int, default=0, help="verify's --seed (default 0)")
    parser.add_argument("--wall", type=float, default=180.0, help="wall seconds before a run is a timeout")
    parser.add_argument(
        "--large-stores",
        choices=("auto", "on", "off"),
        default="auto",
        help="verify's --large-stores (default auto: on from --max-time 10; each run then holds about 4.5 GB)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutants at a time (default 1; the machine is shared)")
    parser.add_argument("--floor", type=float, help="exit 1 if fewer than this %% of the mutants run are flagged")
    parser.add_argument("--root", type=Path, default=common.STAGE, help=f"staging folder (default {common.STAGE})")
    parser.add_argument("--out", type=Path, help="results, one JSON object a line (default ROOT/verify-results.jsonl)")
    parser.add_argument("--reuse", action="store_true", help="keep the staging folder if it has mutants")
    args = parser.parse_args(argv)

    if args.out is None:
        args.out = args.root / "verify-results.jsonl"
    if not (args.reuse and (args.root / "mutants").is_dir()):
        common.stage(args.root)
        common.generate(args.root)
    with tempfile.TemporaryDirectory(prefix="auxmut-") as tmp:
        port_package(Path(tmp))
        status, seconds, tail = run_verify(Path(tmp), args.max_time, args.verify_seed, args.wall, args.large_stores)
    if status != "survived":
        print(f"the unmutated store does not pass verify ({status} in {seconds:.0f} s):\n{tail}")
        return 2
    print(f"the unmutated store passes verify ({seconds:.0f} s)", flush=True)
    candidates = [n for n in common.mutants(args.root) if common.module_of(n) in common.STORE_MODULES]
    chosen = args.mutant or common.sample(candidates, args.sample, args.seed)
    # Run in a seeded random order, so a run stopped early is still a random sample of every module.
    random.Random(args.seed).shuffle(chosen)
    print(
        f"{len(chosen)} of {len(candidates)} mutants of impl/auxstore through auxspec verify "
        f"--max-time {args.max_time:g}, {args.jobs} at a time",
        flush=True,
    )
    started = time.monotonic()
    results: list[dict[str, object]] = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out, ThreadPoolExecutor(max(1, args.jobs)) as pool:
        jobs = [
            pool.submit(check_one, n, args.root, args.max_time, args.verify_seed, args.wall, args.large_stores)
            for n in chosen
        ]
        for job in jobs:
            result = job.result()
            results.append(result)
            out.write(json.dumps(result) + "\n")
            out.flush()
            print(f"{result['status']:9} {result['seconds']:6.1f}s {result['mutant']}", flush=True)
    elapsed = time.monotonic() - started
    per_module = summarize(results)
    return common.report(per_module, score, "flagged", elapsed, args.floor)

if __name__ == "__main__":
    sys.exit(main())
