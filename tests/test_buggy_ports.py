"""auxspec verify flags each planted bug of a port within 60 s, and passes
the same port without the bug."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from auxspec import cli

PORTS = Path(__file__).resolve().parent / "ports"
sys.path.insert(0, str(PORTS))
from simple_port import BUGS  # noqa: E402


def _port_file(tmp_path: Path, bug: str | None) -> Path:
    path = tmp_path / "port.py"
    path.write_text(
        f"import sys\nsys.path.insert(0, {str(PORTS)!r})\n"
        f"from simple_port import make\nBlockObjectStore = make({bug!r})\n"
    )
    return path


def _verify(
    path: Path, max_time: float, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> tuple[int, dict[str, object]]:
    # --large-stores off: the planted bugs are semantic (tests/test_verify_large.py has the large store's).
    argv = ["verify", str(path), "--max-time", str(max_time), "--seed", "11", "--json", "--large-stores", "off"]
    code = cli.main([*argv, "--out", str(tmp_path / "d.jsonl")])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_there_are_at_least_ten_bugs() -> None:
    assert len(set(BUGS)) >= 10


@pytest.mark.timeout(120)
def test_the_correct_port_conforms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _verify(_port_file(tmp_path, None), 10, capsys, tmp_path)
    assert code == 0, report


@pytest.mark.timeout(120)
@pytest.mark.parametrize("bug", BUGS)
def test_each_planted_bug_is_flagged_within_60_s(bug: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    code, report = _verify(_port_file(tmp_path, bug), 60, capsys, tmp_path)
    elapsed = time.monotonic() - started
    assert code == 1, report
    assert report["result"] in ("diverges", "deviates")
    assert elapsed < 60, f"{bug} took {elapsed:.0f} s"
    print(f"{bug}: flagged in {elapsed:.1f} s")


BACKGROUND_BUG = """
from auxstore import BackgroundBlockObjectStore as _Good, BlockObjectStore


class BackgroundBlockObjectStore(_Good):
    # Planted bug: a read does not wait for the queued batches.
    def get_concatenated(self, keys):
        if self._stopping:
            raise RuntimeError("closed")
        self._raise_if_failed()
        return self._store.get_concatenated(keys)
"""


@pytest.mark.timeout(180)
def test_verify_explores_a_background_store_and_flags_reads_that_do_not_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = tmp_path / "bgport.py"
    port.write_text(BACKGROUND_BUG)
    code, report = _verify(port, 60, capsys, tmp_path)
    assert code == 1, report
    assert "background" in report and report["result"] == "diverges"

