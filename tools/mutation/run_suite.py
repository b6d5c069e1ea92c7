"""The suite's mutation score: mutmut 3 over impl/auxstore and the two models,
driven by the fast part of the suite (``[tool.mutmut]`` in pyproject.toml).

    nice -n 10 .venv/bin/python tools/mutation/run_suite.py                     # every mutant
    nice -n 10 .venv/bin/python tools/mutation/run_suite.py --sample 60 --seed 1

The sources are staged in ``build/mutation-suite/`` (see ``common``), mutmut
generates its mutants there, and ``mutmut run`` runs the chosen ones with one
worker (``--jobs``; the machine is shared). mutmut first runs the selected
tests once to learn which tests reach which function, then each mutant
against only those tests, stopping at the first failure. A mutant is
*killed* when a test fails (or it times out, or crashes the interpreter);
*survived* when every test that reaches it passes, or no test reaches it.
The summary is printed per module; with ``--floor P`` the exit status is 1
when fewer than P% of the mutants run are killed.

``--plain`` runs the same tests another way: each mutant is written into a
plain copy of its package (no trampolines, ``recheck``) and the whole
selection runs on it in a fresh process, stopping at the first failure. It
needs no first pass, so it suits samples; a survivor costs one run of the
whole fast suite. It is also the way that works at this revision: mutmut's
first pass crashes the interpreter (SIGSEGV or SIGBUS in its call-stack
ContextVar, inside ``test_background_faults.py``), which no setting of
mutmut's tried here avoided (fork or forkserver isolation, no warm-up, no
setproctitle), while the same tests under the same trampolines pass when
pytest runs them in a process of its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.mutation import common, recheck

ROOT = common.REPO / "build" / "mutation-suite"
KILLED = frozenset({"killed", "timeout", "segfault", "caught by type check"})
SURVIVED = frozenset({"survived", "no tests"})


def score(counts: Counter[str]) -> float:
    judged = sum(n for status, n in counts.items() if status in KILLED | SURVIVED)
    killed = sum(n for status, n in counts.items() if status in KILLED)
    return 100.0 * killed / judged if judged else 100.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, help="run this many mutants, drawn by --seed (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--mutant", action="append", help="run these mutants by name instead of a sample")
    parser.add_argument("--module", action="append", help="only mutants of these modules (auxstore._store...)")
    parser.add_argument("--jobs", type=int, default=1, help="mutmut's --max-children (default 1)")
    parser.add_argument("--floor", type=float, help="exit 1 if fewer than this %% of the mutants run are killed")
    parser.add_argument("--root", type=Path, default=ROOT, help=f"staging folder (default {ROOT})")
    parser.add_argument("--out", type=Path, help="write {mutant: status} as JSON here")
    parser.add_argument("--plain", action="store_true", help="run each mutant in a plain copy (see above)")
    parser.add_argument("--wall", type=float, default=900.0, help="--plain: wall seconds before a mutant times out")
    args = parser.parse_args(argv)

    common.stage(args.root)
    common.generate(args.root)
    everything = common.mutants(args.root)
    candidates = [n for n in everything if args.module is None or common.module_of(n) in args.module]
    chosen = args.mutant or common.sample(candidates, args.sample, args.seed)
    print(f"{len(chosen)} of {len(candidates)} mutants through the fast suite, {args.jobs} at a time", flush=True)
    started = time.monotonic()
    if args.plain:
        # A suite that fails on the unmutated code would "kill" every mutant.
        clean = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *selection()],
            cwd=common.REPO,
            capture_output=True,
            text=True,
        )
        if clean.returncode != 0:
            print(f"the fast suite fails on the unmutated code (exit {clean.returncode}):\n{clean.stdout[-3000:]}")
            return 2
        print("the fast suite passes on the unmutated code", flush=True)
        results = plain(chosen, args.root, args.wall)
        return summarize(results, args.out, time.monotonic() - started, args.floor)
    mutmut = Path(sys.executable).parent / "mutmut"
    done = subprocess.run([str(mutmut), "run", "--max-children", str(args.jobs), *chosen], cwd=args.root)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        print(f"mutmut run exited {done.returncode}")
        return 2
    found = common.statuses(args.root)
    return summarize({name: found[name] for name in chosen}, args.out, elapsed, args.floor)


def selection() -> list[str]:
    """The fast suite: ``[tool.mutmut] pytest_add_cli_args_test_selection``."""
    import tomllib

    config = tomllib.loads((common.REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    return [*config["pytest_add_cli_args_test_selection"], "-p", "tools.mutation.pytest_plugin"]


def plain(chosen: Sequence[str], root: Path, wall: float) -> dict[str, str]:
    """Each mutant's status under the fast suite run on a plain copy (``recheck``)."""
    tests = selection()
    results: dict[str, str] = {}
    for name in chosen:
        status, seconds = recheck.recheck(name, root, tests, wall)
        # pytest exits 1 when a test fails, 2-4 when the mutant breaks
        # collection or pytest itself (an import error): killed either way.
        results[name] = {"survived": "survived", "timeout": "timeout"}.get(status, "killed")
        print(f"{status:9} {seconds:6.1f}s {name}", flush=True)
    return results


def summarize(results: dict[str, str], out: Path | None, elapsed: float, floor: float | None) -> int:
    if out is not None:
        out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    per_module: dict[str, Counter[str]] = {}
    for name, status in results.items():
        per_module.setdefault(common.module_of(name), Counter())[status] += 1
    for name, status in sorted(results.items()):
        if status not in KILLED:
            print(f"  {status}: {name}")
    return common.report(per_module, score, "killed", elapsed, floor)


if __name__ == "__main__":
    sys.exit(main())
