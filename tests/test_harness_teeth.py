"""The model and invariants harnesses can fail: a bug planted in a model step
breaks a contract the model harness checks, and a check made toothless lets
the invariants harness through no more.

The harness bodies run in this process on their committed corpus (what
continuous fuzzing starts from), with the bug patched into the module.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from auxspec.drivers.fuzzing import ModelContractBroken, ToothlessCheck, invariant_teeth, model_contracts
from auxspec.models import sequential as model
from auxstore import BlockObjectStore

CORPUS = Path(__file__).resolve().parents[1] / "fuzz" / "corpus"


def _first_finding(body: Callable[[bytes], None], corpus: str, expected: type[BaseException]) -> str | None:
    for path in sorted((CORPUS / corpus).iterdir()):
        try:
            body(path.read_bytes())
        except expected as finding:
            return f"{path.name}: {finding}"
    return None


def _no_terminal_move(order: dict[str, bytes], terminal: list[str]) -> None:
    pass


def _evict_most_recent(order: dict[str, bytes], capacity: int, counts: dict[str, int], protected: set[str]) -> Any:
    reversed_order = dict(reversed(list(order.items())))
    return PLANTED_ORIGINALS["choose_victims"](reversed_order, capacity, counts, protected)


def _evict_pinned(order: dict[str, bytes], capacity: int, counts: dict[str, int], protected: set[str]) -> Any:
    return PLANTED_ORIGINALS["choose_victims"](order, capacity, {}, protected)


def _last_write_wins(order: dict[str, bytes], batch: dict[str, bytes]) -> list[str]:
    inserted = PLANTED_ORIGINALS["place_batch"](order, batch)
    order.update(batch)
    return inserted  # type: ignore[no-any-return]


def _uncounted(state: model.State, **_: int) -> model.State:
    return state


PLANTED_ORIGINALS = {name: getattr(model, name) for name in ("choose_victims", "place_batch")}
PLANTED: dict[str, tuple[str, Callable[..., Any]]] = {
    "no-terminal-move": ("move_terminal", _no_terminal_move),
    "evict-most-recent": ("choose_victims", _evict_most_recent),
    "evict-pinned": ("choose_victims", _evict_pinned),
    "last-write-wins": ("place_batch", _last_write_wins),
    "no-counters": ("_counted", _uncounted),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_the_model_harness_finds_a_bug_planted_in_a_step(bug: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _first_finding(model_contracts, "model", ModelContractBroken) is None  # clean before
    name, planted = PLANTED[bug]
    monkeypatch.setattr(model, name, planted)
    found = _first_finding(model_contracts, "model", ModelContractBroken)
    assert found is not None, f"{bug}: no contract broken on the model corpus"
    print(f"{bug}: {found.splitlines()[0][:160]}")


def test_the_invariants_harness_fails_on_a_toothless_store_check(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _first_finding(invariant_teeth, "invariants", ToothlessCheck) is None
    monkeypatch.setattr(BlockObjectStore, "check_invariants", lambda self: None)
    found = _first_finding(invariant_teeth, "invariants", ToothlessCheck)
    assert found is not None and "check_invariants() passed" in found


def test_the_invariants_harness_fails_on_a_toothless_model_invariant(monkeypatch: pytest.MonkeyPatch) -> None:
    original = model.violations
    # The model's invariant without its check of reference counts.
    monkeypatch.setattr(model, "violations", lambda s: [v for v in original(s) if "below 1" not in v])
    found = _first_finding(invariant_teeth, "invariants", ToothlessCheck)
    assert found is not None and "a count below 1" in found


def _grows(counts: dict[str, int]) -> int:
    """
    post: all(key in __old__.counts for key in counts)
    """
    counts["new"] = 1
    return len(counts)


def _keeps(counts: dict[str, int]) -> int:
    """
    post: all(key in __old__.counts for key in counts)
    """
    return len(counts)


def test_a_condition_reading_old_inside_a_comprehension_sees_the_arguments_before_the_call() -> None:
    # Only conditions that read __old__ get the copy: the check must find the
    # name inside a comprehension too, or the condition fails with a NameError.
    from auxspec.checks.contracts import ContractViolation, checked, contract_of

    assert contract_of(_grows).reads_old and contract_of(_keeps).reads_old
    assert checked(_keeps)({"a": 1}) == 1
    with pytest.raises(ContractViolation, match="postcondition"):
        checked(_grows)({"a": 1})
