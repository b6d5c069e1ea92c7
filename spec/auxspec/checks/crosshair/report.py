"""Say what a CrossHair run proved: a line per condition and the run's claim.

A *confirmed* condition holds for every input of the space printed with it
(in ``--mode bounded``, a finite one); an *unknown* one was explored until its
time box ran out without a counterexample, which is not a proof; a *refuted*
one has a counterexample, printed.
"""

from __future__ import annotations

from collections.abc import Sequence

from auxspec.checks.crosshair.schedule import TaskResult


def describe(result: TaskResult) -> str:
    """One condition's outcome, with the paths, CPU seconds and bounds behind it."""
    task = result.task
    head = f"{task.model.name}:{task.line}: {task.function} post[{task.index}] {result.status}"
    if result.status in ("confirmed", "unknown", "refuted"):
        head += f" after {result.paths} paths ({result.confirmed_paths} held) in {result.cpu:.1f} CPU s"
        if result.joint > 1:
            head += f" (one exploration for {result.joint} conditions of {task.function})"
    else:
        head += f" in {result.seconds:.1f}s"
    if result.bounds is not None:
        head += f"; bounds: {result.bounds}"
    return "\n".join([head, *("    " + m for m in result.messages)])


def summary(results: Sequence[TaskResult], mode: str) -> str:
    """The run's claim, in words that say what was and was not proved."""
    confirmed = [r for r in results if r.status == "confirmed"]
    unknown = [r for r in results if r.status == "unknown"]
    refuted = [r for r in results if r.status == "refuted"]
    other = [r for r in results if r.status not in ("confirmed", "unknown", "refuted")]
    within = "within the bounds printed with each" if mode == "bounded" else "over every input"
    # Paths are shared by a function's conditions: count each exploration once.
    explored = {(r.task.model, r.task.function): r.paths for r in unknown}
    parts = [
        f"{len(confirmed)} confirmed (every path explored, so they hold {within})",
        f"{len(unknown)} unknown (time box reached after {sum(explored.values())} paths without a "
        "counterexample; not a proof)",
        f"{len(refuted)} refuted",
    ]
    if other:
        parts.append(", ".join(f"{sum(r.status == s for r in other)} {s}" for s in sorted({r.status for r in other})))
    return f"{len(results)} conditions, {mode} inputs: " + "; ".join(parts)
