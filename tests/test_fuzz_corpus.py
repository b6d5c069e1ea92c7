"""The committed corpora: every file (and every regression vector) replays
through the harness bodies without a finding, and together they reach every
line and branch of the store (every file of impl/auxstore) and of the model
(spec/auxspec/models/sequential.py, whole), with nothing excluded (fuzz/coverage). Lines
of the store that only an interrupted, re-entered or hostile call runs count
when the fault tests reach them (fuzz/coverage --with-faults), which says
which those are; the model's every line comes from the corpus alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from auxspec.drivers import verify
from auxspec.drivers.fuzzing import dictionary_text
from auxspec.engine.codec import decode, encode
from auxspec.generators.background import background_scenario

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fuzz" / "corpus"
HARNESSES = ("store", "upstream", "background", "trace_parser", "model", "invariants")


@pytest.fixture(scope="module")
def report() -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "coverage"), "--json", "--with-faults"],
        capture_output=True,
        text=True,
        timeout=1500,  # a budget: the injection sweeps under coverage take minutes, more beside a busy worker
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    parsed: dict[str, object] = json.loads(result.stdout)
    return parsed


@pytest.mark.slow  # fuzz/coverage --with-faults: minutes (the long tier)
@pytest.mark.timeout(1800)  # the fault tests run under coverage, slowly on a loaded machine
def test_every_corpus_file_and_regression_replays_clean(report: dict[str, object]) -> None:
    assert report["failures"] == []
    ran = report["ran"]
    assert isinstance(ran, dict)
    for name in HARNESSES:
        files = [p for p in (CORPUS / name).iterdir() if p.is_file()]
        assert files, f"no committed corpus for {name}"
        assert ran[name] == len(files)
    regressions = ROOT / "spec" / "auxspec" / "vectors" / "regressions"
    assert ran["regression vectors"] == (len(list(regressions.rglob("*.jsonl"))) if regressions.is_dir() else 0)


@pytest.mark.slow  # fuzz/coverage --with-faults: minutes (the long tier)
@pytest.mark.timeout(1800)  # the fault tests run under coverage, slowly on a loaded machine
def test_corpus_reaches_every_line_and_branch_of_the_store_and_the_model(report: dict[str, object]) -> None:
    judged = report["judged"]
    assert isinstance(judged, list)
    files = {r["file"] for r in judged}
    impl = {str(p.relative_to(ROOT)) for p in (ROOT / "impl" / "auxstore").glob("*.py")}
    assert files == impl | {"spec/auxspec/models/sequential.py"}
    for figures in judged:
        assert figures["missing_lines"] == [] and figures["missing_branches"] == [], json.dumps(figures, indent=1)
        if figures["file"].startswith("spec/"):  # the model: from the corpus alone
            assert figures["fault_only_lines"] == [] and figures["fault_only_branches"] == []
        covered, total = figures["branches"]
        assert covered == total
    covered, total = report["total"]["branches"]  # type: ignore[index]
    print(f"store and model: {covered}/{total} branches, lines {report['total']['lines']}")  # type: ignore[index]
    assert total > 300


def test_vectors_encode_to_inputs_that_decode_back() -> None:
    # Seeds are made this way (fuzz/corpus/make_seeds.py): decode(encode(t))
    # must be t up to key renaming, so the same ops and outcomes.
    from auxspec.engine.expect import expected_new, expected_outcomes

    checked = 0
    for vector in verify.load_vectors([ROOT / "spec" / "auxspec" / "vectors"]):
        data = encode(vector.trace)
        if data is None:
            continue
        decoded = decode(data, vector.trace.profile)
        assert [type(op) for op in decoded.ops] == [type(op) for op in vector.trace.ops], vector.name
        assert encode(decoded) == data, vector.name
        assert expected_new(decoded) == vector.expected_new, vector.name
        kinds = [type(o).__name__ + str(getattr(o, "kind", "")) for o, _ in expected_outcomes(decoded)]
        assert kinds == [type(o).__name__ + str(getattr(o, "kind", "")) for o in vector.expected], vector.name
        checked += 1
    assert checked >= 45


def test_dictionaries_are_the_decoders_own() -> None:
    # Written by `fuzz/corpus/make_seeds.py --dictionaries`; stale ones would
    # steer libFuzzer towards bytes that no longer mean what their names say.
    for name in ("store", "upstream", "background", "model", "invariants"):
        assert (ROOT / "fuzz" / f"{name}.dict").read_text() == dictionary_text(name), f"fuzz/{name}.dict is stale"


def test_background_inputs_decode_to_runnable_scenarios() -> None:
    for path in sorted((CORPUS / "background").iterdir()):
        scenario = background_scenario(path.read_bytes())
        assert scenario.max_bytes >= scenario.object_nbytes >= 1
        assert scenario.inner in ("store", "none")
        if scenario.inner == "store" and type(scenario.max_pending_batches) is int:
            assert scenario.max_pending_batches <= 3
