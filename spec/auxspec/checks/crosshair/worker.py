"""Run CrossHair on the postconditions of one function, in this process.

The postconditions of a function are checked in one exploration of its input
space: each path runs the function once and evaluates every condition on the
result, in order, so the space is walked once rather than once per condition
(the paths are the same for each; a function's inputs, not its conditions,
make them). Calls to other contracted functions are run, never assumed
from their contracts. A counterexample names the condition it broke; the others of that
function are then *unknown* (the exploration stopped there). The scheduler
(``schedule``) starts this module as ``--worker`` processes.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from auxspec.checks.crosshair.inputs import (
    ARGUMENTS,
    BOUNDS,
    Bounds,
    described,
    install_ordered_dict,
    is_remote,
    register_bounded,
    register_factories,
)
from auxspec.models import sequential


def load_model(path: Path) -> ModuleType:
    """The model at ``path``: the installed one, or a copy (e.g. with a planted bug) as its own module."""
    if path.resolve() == Path(sequential.__file__).resolve():
        return sequential
    # Registered before exec because dataclasses look their module up in sys.modules.
    name = "_auxspec_checked_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _run_plainly(self: object) -> contextlib.AbstractContextManager[None]:
    """``EnforcedConditions.enabled_enforcement`` that enforces nothing (see ``run_worker``)."""
    return contextlib.nullcontext()


def run_worker(
    model_path: Path, function: str, indices: Sequence[int], timeout: float, mode: str
) -> list[dict[str, Any]]:
    """Analyse ``function``'s postconditions at ``indices`` together; one JSON-ready result each.

    ``mode``: ``bounded`` (every input from ``BOUNDS[function]``, so the
    space is finite and can be exhausted), ``open`` (``register_factories``:
    biased towards small colliding values, but any value is reachable, so it
    can never be exhausted) or ``none`` (CrossHair's own values). ``timeout``
    is the CPU seconds of the whole exploration. ``paths`` counts the
    executions CrossHair tried, ``confirmed_paths`` those that met the
    preconditions and satisfied every condition.
    """
    from time import process_time

    from crosshair import core
    from crosshair.condition_parser import ConditionExpr, condition_parser
    from crosshair.core_and_libs import MessageType, analyze_function
    from crosshair.enforce import EnforcedConditions
    from crosshair.fnutil import FunctionInfo
    from crosshair.options import AnalysisKind, AnalysisOptionSet
    from crosshair.statespace import VerificationStatus

    module = load_model(model_path)
    install_ordered_dict()
    # A call to a function with its own contract (put's steps) is run plainly:
    # not replaced by a value its postconditions allow (CrossHair's
    # short-circuit), and not checked against them, since CrossHair drops a
    # path on which a called function breaks its own postcondition. So put's
    # conditions are checked on put's code whole, and a bug in a step shows
    # through put as well as in the step's own exploration.
    setattr(EnforcedConditions, "enabled_enforcement", _run_plainly)  # noqa: B010 - CrossHair's own method
    bounds = BOUNDS.get(function, Bounds()) if mode == "bounded" else None
    if bounds is not None:
        register_bounded(module, bounds)
    elif mode == "open":
        register_factories(module)
    options = AnalysisOptionSet(analysis_kind=[AnalysisKind.PEP316], per_condition_timeout=timeout)
    checkables = list(analyze_function(FunctionInfo.from_module(module, function), options))
    chosen = []
    for index in indices:
        checkable = checkables[index] if index < len(checkables) else None
        if not isinstance(checkable, core.ConditionCheckable):
            problem = f"{function} post[{index}] is not a checkable condition: {checkable!r}"
            return [{"index": i, "status": "error", "messages": [problem]} for i in indices]
        chosen.append(checkable)

    posts = [checkable.conditions.post[0] for checkable in chosen]
    broke: list[int] = []  # indices of the conditions a path broke
    evaluating: list[int] = []  # the condition being evaluated (one raised, if the analysis stops in it)

    def every_condition(bindings: Mapping[str, object]) -> bool:
        for index, post in zip(indices, posts, strict=True):
            assert post.evaluate is not None
            evaluating[:] = [index]
            if not post.evaluate(bindings):
                broke.append(index)
                return False
        evaluating.clear()
        return True

    first = posts[0]
    joint = ConditionExpr(
        first.condition_type, every_condition, first.filename, first.line, " and ".join(p.expr_source for p in posts)
    )
    lines = {index: post.line for index, post in zip(indices, posts, strict=True)}
    checkable = chosen[0]
    paths = 0
    attempt = core.attempt_call

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal paths
        paths += 1
        return attempt(*args, **kwargs)

    core.attempt_call = counted
    started = process_time()
    checkable.options.deadline = started + timeout
    try:
        with condition_parser(checkable.options.analysis_kind):
            analysis = core.analyze_calltree(checkable.options, replace(checkable.conditions, post=[joint]))
    finally:
        core.attempt_call = attempt
    cpu = process_time() - started
    messages = list(analysis.messages)
    refuted = any(m.state in (MessageType.POST_FAIL, MessageType.EXEC_ERR) for m in messages)
    if refuted:
        # A broken condition; an exception in the function itself breaks them all.
        culprits = set(broke) if any(m.state == MessageType.POST_FAIL for m in messages) else set(indices)
        worst = "refuted"
    elif messages:
        # A condition raised (the one being evaluated), or no input met the precondition.
        culprits = set(evaluating) or set(indices)
        worst = "error"
    else:
        culprits = set(indices)
        worst = "confirmed" if analysis.verification_status == VerificationStatus.CONFIRMED else "unknown"
    takes_state = "state" in ARGUMENTS.get(function, {"state"})
    results = []
    for index in indices:
        mine = index in culprits
        results.append(
            {
                "index": index,
                "status": worst if mine else "unknown",
                "messages": [f"{m.filename}:{lines[index]}: {m.state.value}: {m.message}" for m in messages if mine]
                or ([] if mine else ["exploration stopped at another condition of this function"]),
                "paths": paths,
                "confirmed_paths": analysis.num_confirmed_paths,
                "cpu": round(cpu, 2),
                "joint": len(indices),
                "bounds": None if bounds is None else described(module, bounds, function),
                "space": None if bounds is None or is_remote(module) or not takes_state else bounds.states(),
            }
        )
    return results
