"""The background benchmark runs end to end (``--quick``) and prints every row.

Speed is never asserted: the numbers depend on the machine. This only keeps
the script from rotting (an API change, a crash, a missing row).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from auxspec.engine import target as targets

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_background.py"
ROWS = ("busy median", "busy p99", "busy p99.9", "busy max", "idle median", "idle p99", "throughput")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_benchmark_prints_every_row() -> None:
    if targets.upstream_path() is None:
        pytest.skip("vLLM's module (../shared/upstream/vllm_store.py or $AUXSTORE_UPSTREAM) is absent")
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=110)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for row in ROWS:
        assert any(line.startswith(row) and line.rstrip().endswith("x") for line in lines), row
    assert any(line.startswith("targets: median owner put") for line in lines)
