"""``python -m auxspec.checks.crosshair``: collect the conditions, run them, report.

Without arguments it checks every postcondition of the models CrossHair can
build states for, the sequential model and the remote profile's (``make
verify``'s first step; the background and incremental models are not
checked here: docs/proofs.md says why) and exits 0 only if none was refuted, raised,
or could not meet its precondition. ``--worker`` is the scheduler's entry
point into a worker process.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from auxspec.checks.crosshair.conditions import MODEL_PATH, REMOTE_MODEL_PATH, parse_target, tasks_for
from auxspec.checks.crosshair.inputs import MODES, TIME_BOXES, UNBOUNDED_SEARCHES
from auxspec.checks.crosshair.report import describe, summary
from auxspec.checks.crosshair.schedule import (
    DEFAULT_CONDITION_TIMEOUT,
    DEFAULT_JOBS,
    DEFAULT_MAX_SECONDS,
    PASSED,
    jobs_of,
    run_tasks,
)
from auxspec.checks.crosshair.worker import run_worker


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m auxspec.checks.crosshair",
        description="CrossHair (PEP 316) over every contract of the auxspec model.",
    )
    parser.add_argument(
        "--target",
        action="append",
        help="FILE, FUNCTION or FILE:FUNCTION[,...] (default: models/sequential.py and models/remote.py)",
    )
    parser.add_argument("--budget", type=float, help="wall seconds to aim for; sets the per-function timeout")
    parser.add_argument(
        "--per-condition-timeout",
        type=float,
        help=f"CPU s for each function's conditions, explored together (default {DEFAULT_CONDITION_TIMEOUT})",
    )
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("AUXSPEC_CROSSHAIR_JOBS", DEFAULT_JOBS)))
    parser.add_argument("--max-seconds", type=float, default=DEFAULT_MAX_SECONDS, help="hard wall-clock limit")
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="bounded",
        help="bounded: inputs from finite bounds, so conditions can be confirmed (default); open: small values "
        "favoured but any reachable; none: CrossHair's own values",
    )
    parser.add_argument(
        "--worker", nargs=4, metavar=("MODEL", "FUNCTION", "INDICES", "TIMEOUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)

    if args.worker:
        model, function, indices, timeout = args.worker
        numbers = [int(i) for i in indices.split(",")]
        data = run_worker(Path(model), function, numbers, float(timeout), args.mode)
        print(json.dumps(data[0] if len(numbers) == 1 else data))
        return 0

    targets = [parse_target(t) for t in args.target or [str(MODEL_PATH), str(REMOTE_MODEL_PATH)]]
    tasks = [task for path, names in targets for task in tasks_for(str(path), path, names)]
    jobs = max(1, args.jobs)
    if args.per_condition_timeout is not None:
        timeout = args.per_condition_timeout
    elif args.budget is not None:
        # Workers overlap `jobs` at a time; keep some slack for start-up.
        timeout = max(1.0, 0.8 * args.budget * jobs / max(1, len(jobs_of(tasks))))
    else:
        timeout = DEFAULT_CONDITION_TIMEOUT
    bounded = args.mode == "bounded" and args.per_condition_timeout is None and args.budget is None
    if bounded:
        # Longest box first, so the two cores finish together.
        tasks.sort(key=lambda task: -TIME_BOXES.get(task.function, timeout))
    searches = sorted({task.function for task in tasks} & UNBOUNDED_SEARCHES) if bounded else []
    searched = f"; searched only (too wide to exhaust here): {', '.join(searches)}" if searches else ""
    boxes = "".join(f", {f} {t:g}" for f, t in TIME_BOXES.items()) if bounded else ""
    print(
        f"CrossHair PEP 316 ({args.mode} inputs): {len(tasks)} postconditions of {len(jobs_of(tasks))} functions, "
        f"each function's explored together in {timeout:.1f} CPU s{boxes}, {jobs} at a time, "
        f"hard limit {args.max_seconds:.0f} s{searched}",
        flush=True,
    )
    start = time.monotonic()
    results = run_tasks(
        tasks,
        condition_timeout=timeout,
        jobs=jobs,
        max_seconds=args.max_seconds,
        mode=args.mode,
        timeouts=TIME_BOXES if bounded else None,
        on_result=lambda result: print(describe(result), flush=True),
    )
    elapsed = time.monotonic() - start
    failed = [r for r in results if r.status not in PASSED]
    verdict = "FAILED" if failed else "ok"
    print(f"CrossHair {verdict}: {summary(results, args.mode)}; elapsed {elapsed:.1f} s", flush=True)
    return 1 if failed else 0
