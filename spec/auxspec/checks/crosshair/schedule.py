"""Run conditions in CrossHair worker processes, two at a time by default.

The conditions of one function in one model file go to one worker, which
explores the function's input space once for all of them (``worker``). A
worker gets a CPU time box from CrossHair and is killed after five times that
plus a minute of wall time (the machine may be loaded); a hard wall-clock
limit on the whole run guards against a hung worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auxspec.checks.crosshair.conditions import Task, breadth, round_robin, tasks_for

DEFAULT_CONDITION_TIMEOUT = 10.0  # CPU seconds per worker (one function's conditions)
# Wall clock for the whole run, a guard against a hung worker only: each
# worker's work is bounded in CPU seconds, so the verdict does not depend on
# how loaded the machine is (at 280 s, a machine at load 13 timed out 9 of 22).
DEFAULT_MAX_SECONDS = 1200.0
DEFAULT_JOBS = 2
PASSED = ("confirmed", "unknown")  # outcomes that do not fail the run


@dataclass
class TaskResult:
    task: Task
    status: str  # confirmed | unknown | refuted | error | timeout | skipped
    messages: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall clock of the worker
    paths: int = 0  # executions CrossHair tried (shared by the function's conditions)
    confirmed_paths: int = 0  # of those, the ones that met the preconditions and held
    cpu: float = 0.0  # CPU seconds of the analysis
    bounds: str | None = None  # the input space, in bounded mode
    space: int | None = None  # how many states that space has
    joint: int = 1  # how many conditions the worker checked in the same exploration


@dataclass
class GroupResult:
    group: str
    results: list[TaskResult]
    seconds_to_find: float | None  # wall seconds of the group's workers up to the first refutation

    @property
    def refuted(self) -> bool:
        return any(r.status == "refuted" for r in self.results)

    @property
    def passed(self) -> bool:
        return all(r.status in PASSED for r in self.results)


@dataclass
class _Running:
    tasks: list[Task]
    process: subprocess.Popen[str]
    started: float


def jobs_of(tasks: Sequence[Task]) -> list[list[Task]]:
    """The tasks, one list per worker: a function's conditions together, in first-seen order."""
    jobs: dict[tuple[str, Path, str], list[Task]] = {}
    for task in tasks:
        jobs.setdefault((task.group, task.model, task.function), []).append(task)
    return list(jobs.values())


def _spawn(tasks: Sequence[Task], timeout: float, mode: str) -> subprocess.Popen[str]:
    first = tasks[0]
    indices = ",".join(str(task.index) for task in tasks)
    command = [sys.executable, "-m", "auxspec.checks.crosshair", "--worker"]
    command += [str(first.model), first.function, indices, str(timeout), "--mode", mode]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(task: Task, data: Mapping[str, Any], seconds: float) -> TaskResult:
    return TaskResult(
        task,
        str(data["status"]),
        [str(m) for m in data["messages"]],
        seconds,
        int(data.get("paths", 0)),
        int(data.get("confirmed_paths", 0)),
        float(data.get("cpu", 0.0)),
        data.get("bounds"),
        data.get("space"),
        int(data.get("joint", 1)),
    )


def _finish(running: _Running, now: float) -> list[TaskResult]:
    out, err = running.process.communicate()
    seconds = now - running.started
    lines = out.strip().splitlines()
    if running.process.returncode != 0 or not lines:
        tail = (err or out).strip().splitlines()[-15:]
        why = [f"worker exited {running.process.returncode}", *tail]
        return [TaskResult(task, "error", why, seconds) for task in running.tasks]
    data = json.loads(lines[-1])
    by_index = {int(item["index"]): item for item in (data if isinstance(data, list) else [data])}
    return [_result(task, by_index[task.index], seconds) for task in running.tasks]


def _stop(running: _Running, status: str, now: float) -> list[TaskResult]:
    running.process.kill()
    running.process.communicate()
    return [TaskResult(task, status, [], now - running.started) for task in running.tasks]


def run_tasks(
    tasks: Sequence[Task],
    *,
    condition_timeout: float = DEFAULT_CONDITION_TIMEOUT,
    jobs: int = DEFAULT_JOBS,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    fail_fast: bool = False,
    mode: str = "open",
    timeouts: Mapping[str, float] | None = None,
    on_result: Callable[[TaskResult], None] | None = None,
) -> list[TaskResult]:
    """Run ``tasks`` in worker processes, ``jobs`` at a time, one per function, in order.

    A worker gets ``condition_timeout`` CPU seconds (or ``timeouts`` of its
    function) for its function's conditions. With ``fail_fast``, the first
    refutation in a group stops the group's other workers.
    """

    def box(work: Sequence[Task]) -> float:
        return (timeouts or {}).get(work[0].function, condition_timeout)

    start = time.monotonic()
    pending = jobs_of(tasks)
    running: list[_Running] = []
    results: list[TaskResult] = []
    refuted: set[str] = set()

    def record(done: list[TaskResult]) -> None:
        for result in done:
            results.append(result)
            if result.status == "refuted":
                refuted.add(result.task.group)
            if on_result is not None:
                on_result(result)

    while pending or running:
        now = time.monotonic()
        for item in list(running):
            if item.process.poll() is not None:
                running.remove(item)
                record(_finish(item, now))
            elif now - start > max_seconds or now - item.started > 5 * box(item.tasks) + 60:
                running.remove(item)
                record(_stop(item, "timeout", now))
            elif fail_fast and item.tasks[0].group in refuted:
                running.remove(item)
                record(_stop(item, "skipped", now))
        if fail_fast:
            for work in [w for w in pending if w[0].group in refuted]:
                pending.remove(work)
                record([TaskResult(task, "skipped") for task in work])
        if now - start > max_seconds:
            for work in pending:
                record([TaskResult(task, "timeout", ["overall time limit reached before it started"]) for task in work])
            pending.clear()
        while pending and len(running) < jobs:
            work = pending.pop(0)
            running.append(_Running(work, _spawn(work, box(work), mode), time.monotonic()))
        if running:
            time.sleep(0.05)
    return results


def check_models(
    models: Mapping[str, tuple[Path, Sequence[str] | None]],
    **options: Any,
) -> dict[str, GroupResult]:
    """Check several model files, each a group: ``{group: (path, functions)}``.

    Workers of different groups are interleaved so a slow group does not hold
    up the rest; ``options`` go to ``run_tasks``.
    """
    per_group = [
        sorted(tasks_for(group, path, functions), key=lambda task: -breadth(task.source))
        for group, (path, functions) in models.items()
    ]
    order = [task for round_ in round_robin(per_group) for task in round_]
    results = run_tasks(order, **options)
    grouped: dict[str, GroupResult] = {}
    for group, tasks in zip(models, per_group, strict=True):
        mine = [r for r in results if r.task.group == group]
        mine.sort(key=lambda r: tasks.index(r.task))
        seconds: float | None = None
        spent = 0.0
        counted: set[str] = set()
        for result in mine:
            if result.task.function not in counted:  # a worker's seconds once, not once per condition
                counted.add(result.task.function)
                spent += result.seconds
            if result.status == "refuted":
                seconds = spent
                break
        grouped[group] = GroupResult(group, mine, seconds)
    return grouped
