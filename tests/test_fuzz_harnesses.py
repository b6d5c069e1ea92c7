"""The atheris harnesses run clean for a short time, and the differential
harness finds a bug planted in a copy of the store, which `auxspec reproduce`
then turns into a regression vector.

Times (fixed, so CI time is bounded): each harness fuzzes for 10 s
(-max_total_time=10) from a scratch copy of its committed corpus; each planted
bug gets up to 60 s from an empty corpus (it is found in seconds).
"""

from __future__ import annotations

import os
import shlex
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


def _fuzz(
    harness: str,
    work: Path,
    seconds: int,
    corpus: Path | None,
    env: dict[str, str],
    extra: tuple[str, ...] | list[str] = (),
) -> tuple[int, str, float]:
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
        *extra,
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
    # Victims are drawn from every stored key, the pinned ones first.
    "eviction-ignores-pins": (
        "islice(filterfalse(passed.__contains__, self._lru), excess)",
        "islice(filterfalse(passed.__contains__, chain(self._pinned, self._lru)), excess)",
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
    assert "Finding" in output and "divergence at step" in output, output[-3000:]  # a DivergenceFound
    print(f"{name}: found in {seconds:.1f} s (process wall time)")

    out = tmp_path / "regressions"
    reproduce = subprocess.run(
        [sys.executable, "-m", "auxspec.cli", "reproduce", str(crashes[0]), "--target", str(buggy), "--save", str(out)],
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


# len() counts only the unpinned keys: one bug, one signature (only len sees it).
LEN_BUG = ("        return len(self._lru) + len(self._pinned)\n", "        return len(self._lru)\n")


def _reproduce_lines(output: str) -> list[str]:
    return [line.split("reproduce: ", 1)[1] for line in output.splitlines() if "reproduce: " in line]


@pytest.mark.timeout(300)
def test_planted_bug_gives_one_finding_whose_command_reproduces_it(tmp_path: Path) -> None:
    source = STORE_SOURCE.read_text()
    assert source.count(LEN_BUG[0]) == 1, f"the planted bug no longer applies to {STORE_SOURCE}"
    # A checkout in a folder with a space: libFuzzer's fork mode passes its
    # flags (the corpus, the dictionary, the artifacts) through the shell unquoted.
    work = tmp_path / "my fuzzing"
    shutil.copytree(FUZZ, work / "fuzz", ignore=shutil.ignore_patterns("artifacts"))
    buggy = work / "buggy_len_store.py"
    buggy.write_text(source.replace(*LEN_BUG))
    artifacts = work / "artifacts"
    command = [sys.executable, str(work / "fuzz" / "run"), "--python", sys.executable, "--no-merge", "--jobs", "2"]
    # 30 s of the 60 allowed: the run lasts its whole --time, and the bug is found in seconds
    command += ["--time", str(FIND_SECONDS // 2), "--artifacts", str(artifacts), "store"]
    env = _env(AUXSPEC_TARGET=str(buggy))
    env["PATH"] = "/usr/bin:/bin"  # the harness must not need the venv on PATH (fork mode re-runs it)
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=FIND_SECONDS + 180, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output[-3000:]
    assert "1 distinct finding(s)" in run.stdout, run.stdout[-3000:]
    assert "len: expected ok, got ok (value; deviation none)" in run.stdout, run.stdout[-3000:]
    crashes = sorted((artifacts / "store").glob("crash-*"))
    assert len(crashes) == 1, crashes  # later inputs of the signature are counted, not written
    hits = int(run.stdout.split("hits ", 1)[1].split(";", 1)[0])
    assert hits >= 1
    lines = [line for line in _reproduce_lines(run.stdout) if "auxspec" in line]
    assert len(lines) == 1 and shlex.quote(str(crashes[0])) in lines[0], lines
    assert f"--target {shlex.quote(str(buggy))}" in lines[0], lines
    again = subprocess.run(
        lines[0], shell=True, capture_output=True, text=True, env=env, timeout=60, check=False
    )  # the printed command, as printed
    assert again.returncode == 1, again.stdout + again.stderr
    assert "len(store)" in again.stdout and "divergence at step" in again.stdout
    assert "signature: len: expected ok, got ok (value; deviation none)" in again.stdout


# The C port: a read refreshes every key but the first.
C_PORT = ROOT / "ports" / "c" / "auxport.c"
C_BUG = (
    "for (size_t i = 0; i < keys->n; i++) make_most_recent(found[i]);",
    "for (size_t i = 1; i < keys->n; i++) make_most_recent(found[i]);",
)


@pytest.mark.timeout(300)
def test_planted_bug_in_the_c_port_is_found_through_exec(tmp_path: Path) -> None:
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (gcc or cc) to build the port")
    source = C_PORT.read_text()
    assert source.count(C_BUG[0]) == 1, f"the planted bug no longer applies to {C_PORT}"
    (tmp_path / "auxport.c").write_text(source.replace(*C_BUG))
    port = tmp_path / "buggy_auxport"
    subprocess.run([compiler, "-std=c11", "-O2", "-o", str(port), str(tmp_path / "auxport.c")], check=True)
    code, output, seconds = _fuzz(
        "store", tmp_path, FIND_SECONDS, FUZZ / "corpus" / "store", _env(), ["--exec", str(port)]
    )
    crashes = sorted((tmp_path / "artifacts").glob("crash-*"))
    assert crashes, f"no finding in {FIND_SECONDS} s (exit {code})\n{output[-3000:]}"
    print(f"C port bug: found in {seconds:.1f} s (process wall time)")
    lines = _reproduce_lines(output)
    assert lines and f"--exec {shlex.quote(str(port))}" in lines[0], output[-3000:]
    again = subprocess.run(lines[0], shell=True, capture_output=True, text=True, env=_env(), timeout=60, check=False)
    assert again.returncode == 1 and "divergence at step" in again.stdout, again.stdout + again.stderr
    fixed = subprocess.run(
        shlex.split(lines[0].replace(f"--exec {shlex.quote(str(port))}", "")),
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr  # the bundled store agrees on the same input


@pytest.mark.timeout(120)
def test_fork_mode_workers_drive_the_port_they_were_given(tmp_path: Path) -> None:
    # libFuzzer re-runs the harness with its own flags only: --exec must reach
    # the workers (through AUXSPEC_EXEC), or they fuzz the bundled store instead.
    (tmp_path / "corpus").mkdir()
    command = [sys.executable, str(FUZZ / "store_fuzzer.py"), "--exec", "/bin/false", "-fork=1", "-max_total_time=10"]
    # No -dict: fork mode passes flags on through the shell unquoted, and this checkout's path may hold a space.
    command += [f"-artifact_prefix={tmp_path}/", str(tmp_path / "corpus")]
    ran = subprocess.run(command, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=100, check=False)
    output = ran.stderr + ran.stdout
    assert "ProtocolError: the port " in output and "(it exited with status 1)" in output, output[-3000:]
    assert "cov: 0 ft: 0" in output and "exiting: 0" not in output, output[-3000:]
    assert sorted(tmp_path.glob("crash-*")), output[-3000:]
