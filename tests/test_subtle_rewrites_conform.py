"""verify's verdict on every correct rewrite (tests/ports/rewrites), at one
seed, each in its own ``auxspec verify`` process: each must conform (exit 0).
A conforming run uses its whole budget, so CI gives each 15 s
(``AUXSPEC_SUBTLE_REWRITE_TIME`` changes it; docs/verifying-a-port.md has the
longer runs). The buggy half is tests/test_subtle_ports_flagged.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from auxspec.engine.target import upstream_path

sys.path.insert(0, str(Path(__file__).resolve().parent / "ports" / "subtle"))
from measure import AUXSPEC, Port, discover, run

SEED = int(os.environ.get("AUXSPEC_SUBTLE_SEED", "1"))
BUDGET = float(os.environ.get("AUXSPEC_SUBTLE_REWRITE_TIME", "15"))
REWRITES = [p for p in discover() if p.kind == "rewrite"]
pytestmark = pytest.mark.slow  # a verify process per port, up to a minute each: the long tier
# The one rewrite that is rightly flagged: observably different under upstream
# (tests/test_canonical.py shows the calls).
OBSERVABLY_WRONG = {"r_vllm_scan_moves_pinned"}


@pytest.mark.timeout(400)
@pytest.mark.parametrize("port", REWRITES, ids=[p.name for p in REWRITES])
def test_each_rewrite_gets_its_verdict(port: Port) -> None:
    if not AUXSPEC.exists():
        pytest.skip(f"no {AUXSPEC}: run make .venv/.installed")
    if "_vllm" in port.path.read_text() and upstream_path() is None:
        pytest.skip("a vLLM-based rewrite: vLLM's module (../shared/upstream or $AUXSTORE_UPSTREAM) is not available")
    result, seconds = run(port, SEED, BUDGET, slack=240)
    print(f"{port.name}: {result} in {seconds:.1f} s")
    want = "flagged" if port.name in OBSERVABLY_WRONG else "conforms"
    assert result == want, f"{port.name} ({port.snapshot}): {result} after {seconds:.0f} s"
