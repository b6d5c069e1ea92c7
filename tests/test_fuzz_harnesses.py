"""The atheris harnesses run clean for a short time, and the differential
harness finds a bug planted in a copy of the store, which `auxspec reproduce`
then turns into a regression vector.

Times (fixed, so CI time is bounded): each harness fuzzes for 10 s
(-max_total_time=10) from a scratch copy of its committed corpus; each planted
bug gets up to 60 s from an empty corpus (it is found in seconds).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from auxspec.engine import traces
from auxspec.engine.compare import compare
from auxspec.engine.target import load_target, upstream_path

ROOT = Path(__file__).resolve().parents[1]
FUZZ = ROOT / "fuzz"
STORE_SOURCE = ROOT / "impl" / "auxstore" / "_store.py"
FUZZ_SECONDS = 10
FIND_SECONDS = 60

pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # The harness re-execs through its shebang only in fork/merge modes; keep
    # this interpreter first on PATH anyway so `env python3` finds atheris.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.pop("AUXSPEC_TARGET", None)
    env.pop("AUXSPEC_PROFILE", None)
    env.update(extra)
    return env


def _fuzz(harness: str, work: Path, seconds: int, corpus: Path | None, env: dict[str, str]) -> tuple[int, str, float]:
    scratch = work / "corpus"
    if corpus is not None:
        shutil.copytree(corpus, scratch)
    else:
        scratch.mkdir()
    artifacts = work / "artifacts"
    artifacts.mkdir()
    command = [
        sys.executable,
        str(FUZZ / f"{harness}_fuzzer.py"),
        f"-max_total_time={seconds}",
        f"-artifact_prefix={artifacts}/",
        "-seed=1",
        "-timeout=30",
    ]
    dictionary = FUZZ / f"{harness}.dict"
    if dictionary.exists():
        command.append(f"-dict={dictionary}")
    command.append(str(scratch))
    started = time.monotonic()
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=work, timeout=seconds + 90, check=False
    )
    return result.returncode, result.stderr + result.stdout, time.monotonic() - started


@pytest.mark.timeout(150)
@pytest.mark.parametrize("harness", ["store", "background", "trace_parser", "upstream", "model", "invariants"])
def test_harness_runs_clean(harness: str, tmp_path: Path) -> None:
    if harness == "upstream" and upstream_path() is None:
        pytest.skip("vLLM's module (../shared/upstream/vllm_store.py) is not available")
    code, output, _ = _fuzz(harness, tmp_path, FUZZ_SECONDS, FUZZ / "corpus" / harness, _env())
    findings = [p.name for p in (tmp_path / "artifacts").iterdir()]
    assert code == 0 and not findings, f"{harness}: exit {code}, findings {findings}\n{output[-4000:]}"
    assert "Done" in output and "runs in" in output, output[-2000:]  # libFuzzer's closing line: it really ran


# A bug each, planted by replacing one exact piece of the store's source.
MUTATIONS = {
    # Victims are drawn from every stored key, not only the unpinned ones.
    "eviction-ignores-pins": (
        "islice(filterfalse(passed.__contains__, self._evictable), excess)",
        "islice(filterfalse(passed.__contains__, self._lru), excess)",
    ),
    # A read no longer makes its keys most recent in the global order.
    "read-keeps-recency": (
        "_consume(map(self._lru.move_to_end, keys))",
        "pass",
    ),
}


def _planted(tmp_path: Path, name: str) -> Path:
    original, replacement = MUTATIONS[name]
    source = STORE_SOURCE.read_text()
    assert source.count(original) == 1, f"mutation {name} no longer applies to {STORE_SOURCE}"
    mutated = source.replace(original, replacement)
    assert mutated != source
    copy = tmp_path / f"buggy_store_{name.replace('-', '_')}.py"
    copy.write_text(mutated)
    return copy


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_planted_bug_is_found_and_reproduced(name: str, tmp_path: Path) -> None:
    buggy = _planted(tmp_path, name)
    code, output, seconds = _fuzz("store", tmp_path, FIND_SECONDS, None, _env(AUXSPEC_TARGET=str(buggy)))
    crashes = sorted((tmp_path / "artifacts").glob("crash-*"))
    assert crashes, f"{name}: no finding in {FIND_SECONDS} s (exit {code})\n{output[-3000:]}"
    assert "DivergenceFound" in output, output[-3000:]
    print(f"{name}: found in {seconds:.1f} s (process wall time)")

    out = tmp_path / "regressions"
    reproduce = subprocess.run(
        [sys.executable, "-m", "auxspec.cli", "reproduce", str(crashes[0]), "--target", str(buggy), "--out", str(out)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert reproduce.returncode == 1, reproduce.stdout + reproduce.stderr  # 1: it diverges
    assert "divergence at step" in reproduce.stdout
    written = sorted(out.glob("*.jsonl"))
    assert len(written) == 1, written
    vector = traces.load(written[0])
    assert compare(vector.trace, load_target(str(buggy))) is not None
    assert compare(vector.trace, load_target(None)) is None
