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
    "read_into vs copy floor (**)",
    "read_into numpy gather vs memcpy (*)",  # only with numpy installed (the fast extra)
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
    try:
        import numpy  # noqa: F401
    except ImportError:
        scenarios = tuple(s for s in SCENARIOS if "numpy" not in s)
    else:
        scenarios = SCENARIOS
    for scenario in scenarios:
        rows = [line for line in lines if line.startswith(scenario)]
        assert len(rows) == 1, f"{scenario!r} not printed once:\n{proc.stdout}"
        # scenario, auxstore, vLLM, ratio, target, met? (values are not checked)
        assert rows[0].split()[-1] in {"yes", "NO", "-"}, rows[0]

    report = json.loads(out.read_text())
    assert [row["scenario"] for row in report["rows"]] == list(scenarios)
    for row in report["rows"]:
        assert row["auxstore"] > 0 and row["vllm"] > 0, row
        assert len(row["auxstore_samples"]) == len(row["vllm_samples"]) >= 1, row


SCALE_SCRIPT = REPO_ROOT / "benchmarks" / "bench_scale.py"


@pytest.mark.timeout(120)
def test_scale_quick_run_writes_table_json_and_plot(tmp_path: Path) -> None:
    """bench_scale.py at tiny sizes: a table row per size, the JSON points, and a PNG."""
    if not _upstream().is_file():
        pytest.skip(f"vLLM's store module not found at {_upstream()} (set AUXSTORE_UPSTREAM)")
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (the dev extra)")
    out, png = tmp_path / "scale.json", tmp_path / "scale.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCALE_SCRIPT),
            "--sizes",
            "64,256",
            "--repeat",
            "2",
            "--puts",
            "2",
            "--json",
            str(out),
            "--plot",
            str(png),
        ],
        capture_output=True,
        text=True,
        timeout=110,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split("|")[1].strip() for row in rows] == ["64", "256"], proc.stdout
    report = json.loads(out.read_text())
    assert [p["slots"] for p in report["points"]] == [64, 256]
    for point in report["points"]:
        for field in ("aux_put_us", "vllm_put_us", "aux_read_us", "vllm_read_us", "aux_bytes", "vllm_bytes"):
            assert point[field] > 0, (field, point)
        assert point["read_keys"] == point["slots"] // 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


GROWTH_SCRIPT = REPO_ROOT / "benchmarks" / "bench_growth.py"


@pytest.mark.timeout(120)
def test_growth_run_at_tiny_sizes_has_a_row_per_size_and_pinned_fraction(tmp_path: Path) -> None:
    """bench_growth.py at tiny sizes: a table row and a JSON cell per (capacity, pinned fraction), and a plot."""
    if not _upstream().is_file():
        pytest.skip(f"vLLM's store module not found at {_upstream()} (set AUXSTORE_UPSTREAM)")
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (the dev extra)")
    out, svg = tmp_path / "growth.json", tmp_path / "growth.svg"
    command = [sys.executable, str(GROWTH_SCRIPT), "--sizes", "64,200", "--pinned", "0,0.5,0.99"]
    command += ["--repeat", "1", "--puts", "1", "--json", str(out), "--plot", str(svg)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=110, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("|")[1:3] for line in proc.stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    expected = [(size, pinned) for size in ("64", "200") for pinned in ("0%", "50%", "99%")]
    assert [(a.strip(), b.strip()) for a, b in rows] == expected, proc.stdout
    cells = json.loads(out.read_text())["cells"]
    assert [(c["slots"], c["pinned"]) for c in cells] == [(s, f) for s in (64, 200) for f in (0.0, 0.5, 0.99)]
    for cell in cells:
        # At most all but 32 keys pinned: a put of 16 new keys needs 16 to evict.
        assert cell["pinned_keys"] == min(round(cell["pinned"] * cell["slots"]), cell["slots"] - 32), cell
        for name in ("put", "get", "read_into"):
            assert cell[f"aux_{name}_us"] > 0 and cell[f"vllm_{name}_us"] > 0, (name, cell)
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()


SEARCH_SCRIPT = REPO_ROOT / "benchmarks" / "bench_search.py"


@pytest.mark.timeout(120)
def test_search_benchmark_prints_every_part_for_both_targets() -> None:
    """bench_search.py on a few inputs: the draw rows, then each part for auxstore and vLLM's module."""
    if not _upstream().is_file():
        pytest.skip(f"vLLM's store module not found at {_upstream()} (set AUXSTORE_UPSTREAM)")
    command = [sys.executable, str(SEARCH_SCRIPT), "--inputs", "12"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=110, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    parts = ["decode", "Reach.trace", "compare ", "arcs by coverage.py's C tracer", "arcs by Python tracer"]
    for target in ("auxstore:BlockObjectStore (strict)", "vllm_store.py:BlockObjectStore (upstream)"):
        block = proc.stdout.split(target, 1)[1].split("recording arcs", 1)[0]
        assert all(part in block for part in parts), proc.stdout
    assert "generators.inputs" in proc.stdout and "Hypothesis find(st.binary)" in proc.stdout
    assert "(type CoverageArcs)" in proc.stdout  # the C tracer was the one measured
