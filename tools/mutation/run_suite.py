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
selection runs on it in a fresh process, stopping at the first failure, with
``PLAIN_ADDED`` too: fast tests that only trampolines keep out. It
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
        fast = selection(plain=True)
        clean = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *fast],
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


# Tests that mutmut's trampolines keep out of ``[tool.mutmut]``'s selection but
# a plain copy runs as written, so ``--plain`` runs them too. Each took under
# 4 s here (``pytest --durations``, load average about 3); each kills mutants
# that the rest of the selection lets through (docs/mutation.md).
PLAIN_ADDED: tuple[tuple[str, str], ...] = (
    ("tests/test_store_reentrancy.py", "reentry into the store, found by the code objects on the stack (0.3 s)"),
    ("tests/test_background_reentry.py", "reentry into the background store, found the same way (0.4 s)"),
    (
        "tests/test_mutation_survivors.py::test_a_refused_reentrant_call_names_itself_and_the_call_running",
        "the names in a reentrant call's refusal, found by code objects (0.01 s)",
    ),
    (
        "tests/test_mutation_survivors.py::test_a_refused_reentrant_close_names_itself",
        "the same for a reentrant close (0.01 s)",
    ),
    (
        "tests/test_store_rare_paths.py::test_a_put_does_not_reopen_a_store_closed_as_it_returns",
        "a close racing a put's exit, reached by a profile hook on the put's code object (0.01 s)",
    ),
    (
        "tests/test_store_rare_paths.py::test_a_put_racing_a_latch_is_skipped",
        "a latch racing a put; its 10 s wait is missed only by trampolined code (0.01 s)",
    ),
    (
        "tests/test_store_injection.py::test_an_exception_anywhere_leaves_the_store_before_after_or_broken",
        "an exception at every line and bytecode of the store's calls: before, after or broken (2.3 s)",
    ),
    (
        "tests/test_store_injection.py::test_a_change_that_cannot_be_completed_breaks_the_store_for_every_later_call",
        "the broken mark of a change that could not be completed (0.01 s)",
    ),
    (
        "tests/test_store_injection.py::test_a_mark_left_outside_the_changes_is_stale_and_cleared",
        "a stale mark is cleared, not taken for a broken store (0.01 s)",
    ),
    (
        "tests/test_background_injection.py::test_owner_calls_interrupted_at_every_bytecode",
        "an exception at every bytecode of the background store's owner calls (3.9 s)",
    ),
)
# Left out, though a plain copy could run them: the real-signal tests of both
# injection files (5 s and 3 s of wall time by design, and the interrupts they
# count depend on the load), the background store's injected-interrupt
# sweep (11 s), and the vectors' branch coverage of the model, which fails
# whenever a mutant leaves a branch unreached, so it would count mutants
# that change no behaviour (an `or True`) as killed.


def selection(plain: bool = False) -> list[str]:
    """The fast suite: ``[tool.mutmut] pytest_add_cli_args_test_selection``,
    with ``PLAIN_ADDED`` when ``plain`` (a test deselected there is selected again)."""
    import tomllib

    config = tomllib.loads((common.REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    chosen: list[str] = list(config["pytest_add_cli_args_test_selection"])
    if plain:
        added = [test for test, _ in PLAIN_ADDED]
        kept: list[str] = []
        rest = iter(chosen)
        for arg in rest:
            if arg == "--deselect":
                test = next(rest)
                if test not in added:
                    kept += [arg, test]
            else:
                kept.append(arg)
        files = {arg for arg in kept if not arg.startswith("-")}
        # A test of a file already selected is in once its deselection is gone.
        chosen = kept + [test for test in added if test.split("::")[0] not in files]
    return [*chosen, "-p", "tools.mutation.pytest_plugin"]


def plain(chosen: Sequence[str], root: Path, wall: float) -> dict[str, str]:
    """Each mutant's status under the fast suite run on a plain copy (``recheck``)."""
    tests = selection(plain=True)
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
