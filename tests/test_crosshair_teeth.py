"""CrossHair has teeth: bugs planted in copies of the model are found.

Each mutant is an exact text replacement in a step function of
``spec/auxspec/models/sequential.py`` (the replacement must match exactly once, so a
drifted model fails here instead of silently planting nothing). CrossHair
checks only the function the bug is reached from, and stops a mutant at its
first counterexample. The unmodified model must pass the same check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from auxspec.checks.crosshair import MODEL_PATH, GroupResult, check_models

# CPU seconds CrossHair gets per postcondition of a mutant; a bug that needs
# longer than this is not reliably in reach. The slowest mutant here ("evict
# the most recent key") took 12.8-13.8 CPU s with 40 s allowed, and was missed
# in some runs with 10: 25 leaves room for a loaded machine.
CONDITION_TIMEOUT = float(os.environ.get("AUXSPEC_TEETH_TIMEOUT", "25"))


@dataclass(frozen=True)
class Mutant:
    name: str
    function: str  # the contracted entry point that reaches the bug
    old: str
    new: str


MUTANTS = [
    Mutant(
        "evict a pinned key",
        "put",
        "        if key not in counts and key not in protected:\n",
        "        if key not in protected:\n",
    ),
    Mutant(
        "skip the terminal move",
        "put",
        "    move_terminal(order, terminal)\n",
        "",
    ),
    Mutant(
        "evict one too few",
        "put",
        "    excess = len(order) - capacity\n",
        "    excess = len(order) - capacity - 1\n",
    ),
    Mutant(
        "evict one too many",
        "put",
        "    excess = len(order) - capacity\n",
        "    excess = len(order) - capacity + 1\n",
    ),
    Mutant(
        "first payload wins inside a batch",
        "put",
        "    batch = dict(items)",
        "    batch: dict[str, bytes] = {}\n    for key, payload in items:\n        batch.setdefault(key, payload)\n",
    ),
    Mutant(
        "batch keys unprotected",
        "put",
        "    protected = set(batch) - set(terminal)\n",
        "    protected: set[str] = set()\n",
    ),
    Mutant(
        "strict capacity failure keeps the count changes",
        "put",
        '        if state.profile == "strict":\n            return failed, Err(Kind.CAPACITY)\n',
        '        if state.profile == "strict":\n'
        "            return replace(failed, refs=_frozen_counts(counts)), Err(Kind.CAPACITY)\n",
    ),
    Mutant(
        "get does not refresh recency",
        "get_concatenated",
        "    for key in wanted:\n        order[key] = order.pop(key)\n",
        "",
    ),
    Mutant(
        "terminal keys move in reverse order",
        "put",
        "    for key in terminal:\n        if key in order:\n",
        "    for key in reversed(terminal):\n        if key in order:\n",
    ),
    Mutant(
        "evict the most recent key instead of the least recent",
        "put",
        "    victims: list[str] = []\n    for key in order:\n",
        "    victims: list[str] = []\n    for key in reversed(order):\n",
    ),
    # Bugs that only show from states the State factory is there to reach.
    Mutant(
        "a full store whose keys are all pinned evicts its least recent key",
        "put",
        "    victims = choose_victims(order, state.capacity, counts, protected)\n",
        "    victims = choose_victims(order, state.capacity, counts, protected)\n"
        "    pinned = dict(state.refs)\n"
        "    if len(state.entries) == state.capacity and all(key in pinned for key, _ in state.entries):\n"
        "        victims = list(order)[: max(0, len(order) - state.capacity)]\n",
    ),
    Mutant(
        "a read drops references to keys that are not stored",
        "get_concatenated",
        "    return replace(state, entries=tuple(order.items()), counters=_more(state.counters, hits=len(wanted))), "
        "Ok(data)\n",
        "    refs = tuple((key, count) for key, count in state.refs if key in order)\n"
        "    counters = _more(state.counters, hits=len(wanted))\n"
        "    return replace(state, entries=tuple(order.items()), refs=refs, counters=counters), Ok(data)\n",
    ),
]


def plant(mutant: Mutant, directory: Path) -> Path:
    source = MODEL_PATH.read_text()
    assert source.count(mutant.old) == 1, f"{mutant.name}: the text to replace does not occur exactly once"
    mutated = source.replace(mutant.old, mutant.new)
    assert mutated != source
    path = directory / f"mutant_{MUTANTS.index(mutant):02d}.py"
    path.write_text(mutated)
    return path


def _report(results: dict[str, GroupResult]) -> None:
    for name, group in results.items():
        found = "not found" if group.seconds_to_find is None else f"found in {group.seconds_to_find:.1f}s"
        print(f"{name}: {found}")
        for result in group.results:
            task = result.task
            print(f"    {task.function} post[{task.index}] {result.status} ({result.seconds:.1f}s)")
            for message in result.messages[:1]:
                print(f"        {message}")


CLEAN = "unmodified model"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_planted_bugs_are_found_and_the_model_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The unmodified model, on the functions the mutants are reached from (the
    # whole model is `python -m auxspec.checks.crosshair`, in `make verify`).
    functions = list(dict.fromkeys(mutant.function for mutant in MUTANTS))
    models: dict[str, tuple[Path, list[str] | None]] = {CLEAN: (MODEL_PATH, functions)}
    models.update({mutant.name: (plant(mutant, tmp_path), [mutant.function]) for mutant in MUTANTS})
    results = check_models(models, condition_timeout=CONDITION_TIMEOUT, jobs=2, max_seconds=540, fail_fast=True)
    with capsys.disabled():
        print()
        _report(results)
    clean = results.pop(CLEAN)
    assert clean.passed, [(r.task.function, r.task.index, r.status, r.messages) for r in clean.results]
    missed = [name for name, group in results.items() if not group.refuted]
    assert not missed, f"CrossHair found no counterexample for: {missed}"


def test_a_replacement_that_does_not_match_is_an_error(tmp_path: Path) -> None:
    drifted = Mutant("drifted", "put", "    this text is not in the model\n", "")
    MUTANTS.append(drifted)
    try:
        with pytest.raises(AssertionError, match="does not occur exactly once"):
            plant(drifted, tmp_path)
    finally:
        MUTANTS.remove(drifted)
    assert not list(tmp_path.iterdir())


def test_dict_keeps_cpython_order_inside_crosshair() -> None:
    # The model's recency order is dict order; CrossHair's own dict() does not
    # keep it (see ordered_dict), which gave false counterexamples.
    from crosshair import core
    from crosshair.core_and_libs import standalone_statespace
    from crosshair.tracers import NoTracing

    from auxspec.checks.crosshair import install_ordered_dict

    original = core._PATCH_REGISTRATIONS[dict]
    install_ordered_dict()
    try:
        with standalone_statespace:
            batch = dict([("c", 1), ("e", 2), ("e", 3)])
            order = dict([("a", 1), ("b", 2), ("c", 3)])
            for key in ("b", "a", "b"):
                order[key] = order.pop(key)
            with NoTracing():
                seen = (type(batch), list(batch.items()), list(order))
    finally:
        core._PATCH_REGISTRATIONS[dict] = original
    assert seen == (dict, [("c", 1), ("e", 3)], ["c", "a", "b"])
