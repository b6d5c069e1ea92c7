"""auxspec verify on vLLM's module: it conforms to the upstream profile, and
under strict it reports exactly the deviations docs/deviations.md lists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from auxspec import cli
from auxspec.engine.deviations import DEVIATIONS
from auxspec.engine.target import upstream_path

UPSTREAM = upstream_path()
needs_upstream = pytest.mark.skipif(
    UPSTREAM is None or not UPSTREAM.is_file(), reason="vLLM's module (../shared/upstream/vllm_store.py) is absent"
)
DOC = Path(__file__).resolve().parents[1] / "docs" / "deviations.md"


def documented() -> set[str]:
    table = DOC.read_text().split("| name in `auxspec verify`'s report | section |", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `([a-z-]+)` \|", table, re.MULTILINE))


def test_the_doc_and_the_classifier_name_the_same_deviations() -> None:
    assert documented() == set(DEVIATIONS)


@needs_upstream
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_vllm_conforms_to_upstream(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = cli.main(
        [
            "verify",
            str(UPSTREAM),
            "--profile",
            "upstream",
            "--max-time",
            "20",
            "--seed",
            "5",
            "--json",
            "--out",
            str(tmp_path / "d.jsonl"),
            "--large-stores",  # measured on its own (docs/verifying-a-port.md): 2.2 GB on top of 20 s
            "off",
        ]
    )
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, report
    assert report["result"] == "conforms" and report["explored"] > 0 and report["vectors"] > 0


@needs_upstream
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_vllm_under_strict_lists_exactly_the_documented_deviations(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "dev.jsonl"
    argv = ["verify", str(UPSTREAM), "--keep-going", "--max-time", "20", "--seed", "5", "--json"]
    # The large store and the depth phase off: the deviations show in short traces, and the depth phase
    # would take half of the 20 s from the search that finds them (three went unlisted with it on).
    code = cli.main([*argv, "--out", str(out), "--large-stores", "off", "--depth", "off"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 1
    assert report["result"] == "deviates", report
    assert {d["deviation"] for d in report["deviations"]} == documented()
    for listed in report["deviations"]:  # each comes with its shrunk trace, written as a vector
        assert Path(listed["trace"]).is_file()
