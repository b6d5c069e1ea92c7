"""``auxspec verify`` checks that a Python program which leaves a background
store open can still exit (DESIGN: the writer is a daemon thread), by running
a child interpreter; a port whose writer holds the exit is flagged, the
bundled store conforms, and a child that cannot load the target is reported
as such, not as a hang."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from auxspec import cli
from auxspec.drivers import verify

SCHEMA = Path(cli.__file__).with_name("schemas") / "verify-report.schema.json"

# auxstore's background store with a non-daemon thread that only close() ends:
# an open store holds the interpreter at exit, as a non-daemon writer would.
HOLDS_EXIT = """
import threading

import auxstore
from auxstore import BlockObjectStore


class BackgroundBlockObjectStore(auxstore.BackgroundBlockObjectStore):
    def __init__(self, store, *, max_pending_batches):
        super().__init__(store, max_pending_batches=max_pending_batches)
        self._closed_event = threading.Event()
        threading.Thread(target=self._closed_event.wait, daemon=False).start()

    def close(self):
        self._closed_event.set()
        super().close()
"""

# The same, with its extra thread a daemon: the program exits.
LETS_EXIT = HOLDS_EXIT.replace("daemon=False", "daemon=True")

# A port whose import fails: the child cannot load it (the verifier itself
# would have stopped earlier; this stands for a target that imports only there).
FAILS_TO_LOAD = """
import not_a_module_anywhere_xyz
"""


def _port(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "port.py"
    path.write_text(text)
    return path


def _verify(argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> tuple[int, dict[str, Any]]:
    base = ["verify", *argv, "--max-time", "10", "--seed", "3", "--json", "--large-stores", "off"]
    code = cli.main([*base, "--out", str(tmp_path / "d.jsonl")])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))
    return code, report


@pytest.mark.timeout(120)  # the small scope runs to its end first (a fixed count; slower on a loaded machine)
def test_a_port_whose_open_store_holds_the_exit_is_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _verify([str(_port(tmp_path, HOLDS_EXIT))], capsys, tmp_path)
    assert code == 1, report
    assert report["result"] == "diverges"
    violation = report["background"]["violation"]
    assert "leaves a background store open did not exit within 10 s" in violation
    assert "DESIGN: a daemon writer" in violation
    assert report["background_exit"]["status"] is None  # killed
    assert report["background_exit"]["violation"] == violation
    # The check's time is the background phase's.
    assert report["scope"]["phases"]["background"]["seconds"] >= verify.EXIT_SECONDS - 0.1


@pytest.mark.timeout(120)  # as above: the small scope first
def test_the_bundled_store_conforms_and_its_exit_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _verify([], capsys, tmp_path)
    assert code == 0, report
    assert report["background_exit"]["status"] == 0
    assert "violation" not in report["background_exit"]
    assert report["background_exit"]["seconds"] < verify.EXIT_SECONDS


@pytest.mark.timeout(30)
def test_the_check_tells_a_held_exit_from_a_clean_one(tmp_path: Path) -> None:
    held = verify.check_background_exit(str(_port(tmp_path, HOLDS_EXIT)), exit_seconds=2.0)
    assert held.status is None
    assert held.violation is not None and "did not exit within 2 s" in held.violation
    assert held.error is None
    assert held.seconds >= 2.0
    clean = verify.check_background_exit(str(_port(tmp_path, LETS_EXIT)))
    assert (clean.status, clean.violation, clean.error) == (0, None, None), clean


@pytest.mark.timeout(30)
def test_a_child_that_cannot_load_the_target_is_no_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failed = verify.check_background_exit(str(_port(tmp_path, FAILS_TO_LOAD)))
    assert failed.violation is None
    assert failed.error is not None and "could not load the target" in failed.error
    assert "not_a_module_anywhere_xyz" in failed.error
    assert "did not exit" not in failed.error


@pytest.mark.timeout(30)
def test_a_port_that_crashes_after_its_script_is_no_hang(tmp_path: Path) -> None:
    crashes = LETS_EXIT + "\nimport atexit, os\natexit.register(lambda: os._exit(7))\n"
    failed = verify.check_background_exit(str(_port(tmp_path, crashes)))
    assert failed.status == 7
    assert failed.violation is not None and "exited with status 7 after its script's end" in failed.violation
    assert "not an exit hang" in failed.violation
