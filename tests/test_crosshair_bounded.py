"""CrossHair's bounded mode proves what it says: a confirmed condition was
checked on every input of its bounds (as many paths as the bounds have
states), and a bug inside the bounds is refuted, not reported as unknown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from auxspec.checks.crosshair import BOUNDS, MODEL_PATH


def _worker(model: Path, function: str, index: int, timeout: float = 20.0) -> dict[str, object]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "auxspec.checks.crosshair",
            "--worker",
            str(model),
            function,
            str(index),
            str(timeout),
            "--mode",
            "bounded",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
def test_a_confirmed_condition_ran_once_per_state_of_its_bounds() -> None:
    result = _worker(MODEL_PATH, "length", 1)
    assert result["status"] == "confirmed", result
    # length takes only a state: one path per state the bounds build.
    assert result["paths"] == result["confirmed_paths"] == BOUNDS["length"].states() == 236


@pytest.mark.slow
def test_a_bug_inside_the_bounds_is_refuted(tmp_path: Path) -> None:
    source = MODEL_PATH.read_text()
    right = "    return state, Ok(len(state.entries))\n"
    assert source.count(right) == 1
    # Miscounts a full store of capacity 3: inside length's bounds (capacity 1-3).
    wrong = "    return state, Ok(len(state.entries) - (len(state.entries) == state.capacity == 3))\n"
    model = tmp_path / "planted.py"
    model.write_text(source.replace(right, wrong))
    result = _worker(model, "length", 1)
    assert result["status"] == "refuted", result
