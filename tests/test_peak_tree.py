"""tools/peak_tree.py, which measures the README's commands: it sums the memory of the whole
process tree (the two xdist workers and their children), not only the largest process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "peak_tree.py"
HOLD = "import time; x = bytearray({n}); x[::4096] = b'1' * len(x[::4096]); time.sleep(2)"


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_the_peak_is_the_sum_over_the_tree_and_the_exit_status_is_kept() -> None:
    # Two children side by side, 150 MB each: the tree peaks above 300 MB, each process below 200 MB.
    child = f"import subprocess, sys; c = [subprocess.Popen([sys.executable, '-c', {HOLD.format(n=150_000_000)!r}])"
    child += " for _ in range(2)]; [p.wait() for p in c]; sys.exit(3)"
    result = subprocess.run(
        [sys.executable, str(TOOL), "--json", sys.executable, "-c", child], capture_output=True, text=True, check=False
    )
    assert result.returncode == 3, result.stderr
    figures = json.loads(result.stderr.strip().splitlines()[-1])
    assert figures["exit"] == 3 and figures["seconds"] >= 2
    assert 300_000_000 <= figures["peak_tree_bytes"] < 600_000_000, figures
