"""A simulation of the ClusterFuzzLite / OSS-Fuzz build (Docker is not
available here): .clusterfuzzlite/build.sh and fuzz/oss-fuzz/build.sh run with
$SRC, $OUT and $WORK in a scratch folder and stand-ins on PATH for the
image's `pip3` (records its arguments; the project is already installed) and
`compile_python_fuzzer` (the real one packages the harness with pyinstaller
and writes a wrapper $OUT/<name>; the stand-in copies the harness into $OUT
and writes a wrapper that runs it with this interpreter). Then the $OUT
artifacts are checked and one built fuzzer runs for a few seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FUZZ = ROOT / "fuzz"
BUILT = sorted(p.name.removesuffix(".py") for p in FUZZ.glob("*_fuzzer.py") if p.name != "upstream_fuzzer.py")

COMPILE_STUB = """#!/bin/sh
# Stand-in for OSS-Fuzz's compile_python_fuzzer FUZZER [pyinstaller args...].
set -eu
fuzzer=$1
name=$(basename -s .py "$fuzzer")
cp "$fuzzer" "$OUT/$name.pkg.py"
printf '#!/bin/sh\\n# LLVMFuzzerTestOneInput for fuzzer detection.\\nexec "%s" "$(dirname "$0")/%s.pkg.py" "$@"\\n' \\
  "{python}" "$name" > "$OUT/$name"
chmod +x "$OUT/$name"
echo "$fuzzer" >> "$WORK/compiled.log"
"""

PIP_STUB = """#!/bin/sh
echo "$@" >> "$WORK/pip.log"
"""


def _simulate(tmp_path: Path, script: str) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    src, out, work, bin_dir = (tmp_path / name for name in ("src", "out", "work", "bin"))
    for folder in (src, out, work, bin_dir):
        folder.mkdir()
    # What the Dockerfile copies: the repository at $SRC/auxstore.
    shutil.copytree(
        ROOT, src / "auxstore", ignore=shutil.ignore_patterns(".venv", ".git", "*cache*", ".hypothesis", "artifacts")
    )
    (bin_dir / "compile_python_fuzzer").write_text(COMPILE_STUB.replace("{python}", sys.executable))
    (bin_dir / "pip3").write_text(PIP_STUB)
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    env = dict(os.environ, SRC=str(src), OUT=str(out), WORK=str(work))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    result = subprocess.run(
        ["bash", str(src / "auxstore" / script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=src / "auxstore",
        timeout=120,
        check=False,
    )
    return out, work, result


@pytest.mark.timeout(180)
@pytest.mark.parametrize("script", [".clusterfuzzlite/build.sh", "fuzz/oss-fuzz/build.sh"])
def test_build_produces_every_fuzzer_corpus_and_dict(tmp_path: Path, script: str) -> None:
    out, work, result = _simulate(tmp_path, script)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (work / "pip.log").read_text().split() == ["install", ".[fuzz]"]
    compiled = (work / "compiled.log").read_text().split()
    assert sorted(Path(p).name.removesuffix(".py") for p in compiled) == BUILT
    assert "skipping upstream_fuzzer" in result.stdout
    for name in BUILT:
        runnable = out / name
        assert runnable.is_file() and os.access(runnable, os.X_OK), name
        short = name.removesuffix("_fuzzer")
        with zipfile.ZipFile(out / f"{name}_seed_corpus.zip") as archive:
            members = sorted(Path(m).name for m in archive.namelist())
            committed = sorted(p.name for p in (FUZZ / "corpus" / short).iterdir())
            assert members == committed, name
            first = committed[0]
            inside = next(m for m in archive.namelist() if Path(m).name == first)
            assert archive.read(inside) == (FUZZ / "corpus" / short / first).read_bytes()
        assert (out / f"{name}.dict").read_text() == (FUZZ / f"{short}.dict").read_text()
    assert not (out / "upstream_fuzzer").exists()


@pytest.mark.timeout(120)
def test_a_built_fuzzer_runs(tmp_path: Path) -> None:
    out, _, result = _simulate(tmp_path, ".clusterfuzzlite/build.sh")
    assert result.returncode == 0, result.stdout + result.stderr
    corpus = tmp_path / "run-corpus"
    with zipfile.ZipFile(out / "store_fuzzer_seed_corpus.zip") as archive:
        archive.extractall(corpus)
    run = subprocess.run(
        [str(out / "store_fuzzer"), "-max_total_time=3", f"-dict={out / 'store_fuzzer.dict'}", str(corpus)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=90,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Done" in run.stderr and "runs in" in run.stderr, run.stderr[-2000:]


def test_workflows_and_project_files_name_the_documented_actions() -> None:
    # No YAML parser or GitHub here: check the lines ClusterFuzzLite reads.
    pr = (ROOT / ".github" / "workflows" / "cflite_pr.yml").read_text()
    batch = (ROOT / ".github" / "workflows" / "cflite_batch.yml").read_text()
    for workflow, mode in ((pr, "code-change"), (batch, "batch")):
        assert "uses: google/clusterfuzzlite/actions/build_fuzzers@v1" in workflow
        assert "uses: google/clusterfuzzlite/actions/run_fuzzers@v1" in workflow
        assert f"mode: '{mode}'" in workflow
        assert "language: python" in workflow
        assert "- address" in workflow
    assert "pull_request:" in pr and "schedule:" in batch and "cron:" in batch
    assert (ROOT / ".clusterfuzzlite" / "project.yaml").read_text().strip() == "language: python"
    assert "FROM gcr.io/oss-fuzz-base/base-builder-python" in (ROOT / ".clusterfuzzlite" / "Dockerfile").read_text()
    assert "language: python" in (ROOT / "fuzz" / "oss-fuzz" / "project.yaml").read_text()
