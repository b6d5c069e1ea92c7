"""A function's conditions are explored once together (auxspec.checks.crosshair.worker):
a bug that breaks one of them is refuted and named, and the others are not
called confirmed, since the exploration stopped at the counterexample."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from auxspec.checks.crosshair import BOUNDS, MODEL_PATH, contracted_functions


def _joint(model: Path, function: str, indices: str) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "auxspec.checks.crosshair", "--worker", str(model), function, indices, "30"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results: list[dict[str, object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def test_both_conditions_of_length_are_confirmed_in_one_exploration() -> None:
    first, second = _joint(MODEL_PATH, "length", "0,1")
    for result in (first, second):
        assert result["status"] == "confirmed", result
        # One path per state of length's bounds, for both conditions at once.
        assert result["paths"] == result["confirmed_paths"] == BOUNDS["length"].states() == 236, result
        assert result["joint"] == 2


def test_a_bug_breaking_one_condition_is_refuted_and_the_other_is_not_confirmed(tmp_path: Path) -> None:
    source = MODEL_PATH.read_text()
    right = "    return state, Ok(len(state.entries))\n"
    assert source.count(right) == 1
    # Miscounts a full store of capacity 3 (inside length's bounds): post[1]
    # (the count) breaks; post[0] (the state is returned as it was) still holds.
    wrong = "    return state, Ok(len(state.entries) - (len(state.entries) == state.capacity == 3))\n"
    model = tmp_path / "planted.py"
    model.write_text(source.replace(right, wrong))
    same_state, count = _joint(model, "length", "0,1")
    assert count["status"] == "refuted", count
    line = contracted_functions(model)["length"][1][0]
    messages = [str(m) for m in count["messages"]]  # type: ignore[attr-defined]
    assert messages and all(m.startswith(f"{model}:{line}: ") for m in messages), messages
    assert same_state["status"] == "unknown", same_state


def test_a_step_of_put_with_its_own_contract_refutes_a_planted_bug(tmp_path: Path) -> None:
    # put's eviction step, checked on its own (its space is small enough to
    # exhaust): evicting the most recent evictable key instead of the least.
    source = MODEL_PATH.read_text()
    right = "    victims: list[str] = []\n    for key in order:\n"
    assert source.count(right) == 1
    model = tmp_path / "planted.py"
    model.write_text(source.replace(right, "    victims: list[str] = []\n    for key in reversed(order):\n"))
    least_recent, enough = _joint(model, "choose_victims", "0,1")
    assert least_recent["status"] == "refuted", least_recent
    assert enough["status"] == "unknown", enough
    clean = _joint(MODEL_PATH, "choose_victims", "0,1")
    assert [r["status"] for r in clean] == ["confirmed", "confirmed"], clean


def test_the_run_time_contracts_read_post_names_and_old_values() -> None:
    # apply_pins changes its counts in place: its conditions name the counts
    # before the call as __old__.counts, which the run-time check provides too.
    from auxspec.checks.contracts import ContractViolation, checked, contract_of
    from auxspec.models import sequential

    assert len(contract_of(sequential.apply_pins).post) == len(contracted_functions(MODEL_PATH)["apply_pins"]) == 4
    assert checked(sequential.apply_pins)({"a": 1}, ["b"], ["a"]) == ({"b": 1}, ["a"], False)

    # The same contract on a step that forgets which keys reached zero, defined
    # among the model's names (a condition sees the globals of its function).
    scope = dict(vars(sequential))
    exec(  # a fixed planted step, not input
        "def forgets_terminal_keys(counts, retain, release):\n"
        "    counts, _, over = apply_pins(counts, retain, release)\n"
        "    return counts, [], over\n",
        scope,
    )
    forgets_terminal_keys = scope["forgets_terminal_keys"]
    forgets_terminal_keys.__doc__ = sequential.apply_pins.__doc__
    with pytest.raises(ContractViolation, match="_terminal_after"):
        checked(forgets_terminal_keys)({"a": 1}, [], ["a"])
