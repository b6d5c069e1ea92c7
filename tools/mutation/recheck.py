"""Run chosen tests against single mutants applied to a plain copy of the
sources, without mutmut's trampolines.

mutmut runs every mutant through a trampoline (an extra call around each
function), which the tests that look at the store's code objects and frames
(the reentrancy tests, the bytecode-injection tests) cannot run under; they
are left out of ``[tool.mutmut]``'s selection. This runs them, or any other
tests, on the mutants that survived it: the mutated file is written into a
copy of ``auxstore`` (or ``auxspec``) in a temporary folder put first on
``PYTHONPATH``, and pytest runs there, stopping at the first failure.

    nice -n 10 .venv/bin/python tools/mutation/recheck.py --root build/mutation-suite \\
        --tests tests/test_store_reentrancy.py --mutant 'auxstore._store.xǁBlockObjectStoreǁ__contains____mutmut_14'
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.mutation import common

PACKAGES = {"auxstore": "impl/auxstore", "auxspec": "spec/auxspec"}


def recheck(name: str, root: Path, tests: Sequence[str], wall: float) -> tuple[str, float]:
    """(``killed`` | ``survived`` | ``timeout`` | ``exit N``, seconds) for mutant ``name`` under ``tests``."""
    relative, source = common.mutated_source(name, root)
    package = relative.split("/", 1)[0]
    with tempfile.TemporaryDirectory(prefix="auxrecheck-") as tmp:
        copy = Path(tmp) / package
        shutil.copytree(common.REPO / PACKAGES[package], copy, ignore=shutil.ignore_patterns("__pycache__"))
        (Path(tmp) / relative).write_text(source)
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
        env = {**os.environ, "PYTHONPATH": tmp}
        started = time.monotonic()
        try:
            done = subprocess.run(command, cwd=common.REPO, env=env, capture_output=True, text=True, timeout=wall)
        except subprocess.TimeoutExpired:
            return "timeout", time.monotonic() - started
        seconds = time.monotonic() - started
    return {0: "survived", 1: "killed"}.get(done.returncode, f"exit {done.returncode}"), seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=common.STAGE, help="the staging folder holding the mutants")
    parser.add_argument("--tests", action="append", required=True, help="a test file or node id (repeatable)")
    parser.add_argument("--mutant", action="append", required=True, help="a mutant's name (repeatable)")
    parser.add_argument("--wall", type=float, default=600.0, help="wall seconds before a run is a timeout")
    args = parser.parse_args(argv)
    killed = 0
    for name in args.mutant:
        status, seconds = recheck(name, args.root, args.tests, args.wall)
        killed += status in ("killed", "timeout")
        print(f"{status:9} {seconds:6.1f}s {name}", flush=True)
    print(f"{killed} of {len(args.mutant)} killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
