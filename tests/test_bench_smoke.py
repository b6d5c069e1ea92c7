"""The store benchmark runs end to end (`--quick`) and prints every scenario.

Speed is never asserted here: the numbers depend on the machine. This only
keeps the script from rotting (an API change, a crash, a missing row).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "benchmarks" / "bench_store.py"

# Written out here, not imported from the script, so a dropped row fails.
SCENARIOS = (
    "put steady (16 new, evicting)",
    "put 0% pinned",
    "put 50% pinned",
    "put 95% pinned",
    "get_concatenated 5,000",
    "read_into vs vLLM get_concat",
    "read_into vs memcpy (*)",
    "prefix-hit get_concatenated",
    "prefix-hit read_into vs memcpy",
    "metadata bytes/object",
)


def _upstream() -> Path:
    configured = os.environ.get("AUXSTORE_UPSTREAM")
    if configured:
        return Path(configured)
    return REPO_ROOT.parent / "shared" / "upstream" / "vllm_store.py"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_quick_run_prints_every_scenario(tmp_path: Path) -> None:
    if not _upstream().is_file():
        pytest.skip(f"vLLM's store module not found at {_upstream()} (set AUXSTORE_UPSTREAM)")
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for scenario in SCENARIOS:
        rows = [line for line in lines if line.startswith(scenario)]
        assert len(rows) == 1, f"{scenario!r} not printed once:\n{proc.stdout}"
        # scenario, auxstore, vLLM, ratio, target, met? (values are not checked)
        assert rows[0].split()[-1] in {"yes", "NO", "-"}, rows[0]

    report = json.loads(out.read_text())
    assert [row["scenario"] for row in report["rows"]] == list(SCENARIOS)
    for row in report["rows"]:
        assert row["auxstore"] > 0 and row["vllm"] > 0, row
        assert len(row["auxstore_samples"]) == len(row["vllm_samples"]) >= 1, row
