"""The fuzzers' cheap mode, finding signatures and `auxspec reproduce`.

The cheap mode (``compare(..., every=k)``) must report exactly what the
precise one does: the same first diverging op, the same expected and actual
text, on every committed corpus input, for a store with a planted bug and
for the bundled store. `auxspec reproduce` replays `.jsonl` files as traces
and raw inputs as inputs, refuses anything else, and writes a vector only
with `--save` and only while the target diverges.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import auxstore
from auxspec import cli
from auxspec.drivers.fuzzing import deduplicated, libfuzzer_argv, signature
from auxspec.engine import traces
from auxspec.engine.codec import decode, encode
from auxspec.engine.compare import CHECK_EVERY, DivergenceFound, compare
from auxspec.engine.ops import Get, Len, Put, Trace
from auxspec.engine.target import Target, load_target

ROOT = Path(__file__).resolve().parents[1]
FUZZ = ROOT / "fuzz"
STORE_SOURCE = ROOT / "impl" / "auxstore" / "_store.py"
BUGS = {
    "read-keeps-recency": ("_consume(map(self._lru.move_to_end, keys))", "pass"),
    "len-counts-unpinned": ("        return len(self._lru) + len(self._pinned)\n", "        return len(self._lru)\n"),
}


def _buggy(tmp_path: Path, name: str) -> Path:
    original, replacement = BUGS[name]
    source = STORE_SOURCE.read_text()
    assert source.count(original) == 1, f"{name} no longer applies to {STORE_SOURCE}"
    path = tmp_path / f"{name.replace('-', '_')}.py"
    path.write_text(source.replace(original, replacement))
    return path


def _corpus() -> list[bytes]:
    return [path.read_bytes() for path in sorted((FUZZ / "corpus" / "store").iterdir()) if path.is_file()]


@pytest.mark.parametrize("bug", [None, "read-keeps-recency"])
def test_cheap_mode_reports_what_the_precise_mode_does(bug: str | None, tmp_path: Path) -> None:
    """Whatever the cheap mode reports is the precise report. What it can
    miss: a difference in state alone that heals before the next checkpoint
    (no outcome shows it); the test counts those and requires the cheap mode
    to find the bug on most of the inputs the precise one does (on the
    committed corpus, 3 of 5 for this bug; 5 of 5 when eviction ignores pins)."""
    target = load_target(str(_buggy(tmp_path, bug)) if bug else None)
    both = missed = 0
    for data in _corpus():
        trace = decode(data, "strict", target.features)
        precise, cheap = compare(trace, target), compare(trace, target, every=CHECK_EVERY)
        if cheap is not None:
            assert precise is not None
            assert (cheap.step, cheap.expected, cheap.actual) == (precise.step, precise.expected, precise.actual)
            both += 1
        elif precise is not None:
            assert precise.want == precise.got, precise.render()  # only a state the outcomes agree on
            missed += 1
    if bug:
        assert both > missed, (both, missed)
        print(f"{bug}: {both} inputs diverge in both modes, {missed} only when every op's state is compared")
    else:
        assert both == missed == 0


def test_a_difference_only_in_state_is_found_at_the_checkpoint_and_named_at_its_op(tmp_path: Path) -> None:
    target = load_target(str(_buggy(tmp_path, "read-keeps-recency")))
    ops = (Put((("a", b"xx"), ("b", b"yy"))), Get(("a",)), Len(), Len(), Len())
    trace = Trace("strict", 8, 2, ops)  # every outcome right; the order after the read of a is wrong
    found = compare(trace, target, every=CHECK_EVERY)
    assert found is not None and found.step == 1, found  # the read that did not move a, not the last op


class _Forgetful(auxstore.BlockObjectStore):
    def __len__(self) -> int:
        return 7


def test_a_target_that_does_not_repeat_itself_is_reported_as_the_cheap_run_saw_it() -> None:
    bundled = load_target(None)
    built: list[int] = []

    def every_other(max_bytes: int, object_nbytes: int) -> auxstore.BlockObjectStore:
        built.append(1)  # the first store of each pair forgets len()
        cls = _Forgetful if len(built) % 2 else auxstore.BlockObjectStore
        return cls(max_bytes=max_bytes, object_nbytes=object_nbytes)

    target = Target("flaky", every_other, bundled.observe, bundled.features)
    found = compare(Trace("strict", 4, 2, (Put((("a", b"xx"),)), Len())), target, every=CHECK_EVERY)
    assert found is not None and found.step == 1 and "does not repeat itself" in found.actual


def test_one_bug_one_signature_across_inputs(tmp_path: Path) -> None:
    target = load_target(str(_buggy(tmp_path, "len-counts-unpinned")))
    found = set()
    for data in _corpus():
        divergence = compare(decode(data, "strict", target.features), target)
        if divergence is not None:
            found.add(signature(divergence))
    assert found == {"len: expected ok, got ok (value; deviation none)"}


def test_later_inputs_of_a_signature_are_counted_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUXSPEC_FINDINGS", str(tmp_path))

    def body(data: bytes) -> None:
        raise AssertionError(f"bad {len(data)} in {data!r}")  # numbers and quoted values do not split signatures

    harness = deduplicated(body)
    with pytest.raises(AssertionError):
        harness(b"one")
    harness(b"three")  # the same signature: counted, not raised
    (record,) = (tmp_path / "signatures").glob("*.json")
    assert record.with_suffix(".hits").stat().st_size == 2
    monkeypatch.delenv("AUXSPEC_FINDINGS")
    with pytest.raises(AssertionError):
        deduplicated(body)(b"x")  # without the folder, every finding raises


def test_the_harness_reexecs_with_its_own_interpreter() -> None:
    argv = libfuzzer_argv(["fuzz/store_fuzzer.py", "-fork=2"])
    assert argv[0].startswith(shlex.quote(sys.executable))  # quoted: libFuzzer runs it through the shell
    assert argv[0].endswith("store_fuzzer.py") or argv[0].endswith("store_fuzzer.py'")
    assert argv[1] == "-fork=2"


def _input(tmp_path: Path) -> Path:
    data = encode(Trace("strict", 4, 2, (Put((("a", b"xx"),), ("a",)), Len())))
    assert data is not None
    crash = tmp_path / "crash-0123"
    crash.write_bytes(data)
    return crash


def test_reproduce_saves_only_when_asked_and_diverging(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crash, buggy, out = _input(tmp_path), _buggy(tmp_path, "len-counts-unpinned"), tmp_path / "regressions"
    assert cli.main(["reproduce", str(crash), "--target", str(buggy)]) == 1
    assert "--save DIR" in capsys.readouterr().out and not out.exists()
    assert cli.main(["reproduce", str(crash), "--save", str(out)]) == 0  # the bundled store agrees
    assert "no vector written" in capsys.readouterr().out and not out.exists()
    assert cli.main(["reproduce", str(crash), "--target", str(buggy), "--save", str(out)]) == 1
    (written,) = out.glob("*.jsonl")
    vector = traces.load(written)
    assert compare(vector.trace, load_target(str(buggy))) is not None
    assert compare(vector.trace, load_target(None)) is None


def test_reproduce_replays_a_jsonl_file_as_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    buggy = _buggy(tmp_path, "len-counts-unpinned")
    trace = Trace("strict", 4, 2, (Put((("pinned", b"xx"),), ("pinned",)), Len()))
    path = tmp_path / "case.jsonl"
    traces.write(traces.vector_from_trace(trace, "case", "a pinned key, then len()"), path)
    assert cli.main(["reproduce", str(path), "--target", str(buggy)]) == 1
    printed = capsys.readouterr().out
    assert "the trace in case.jsonl" in printed and "'pinned'" in printed and "divergence at step 2" in printed
    assert cli.main(["reproduce", str(path)]) == 0


def test_a_trace_file_under_any_name_is_read_by_its_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # verify --out found.vec writes a vector by that name: the commands it prints must read it.
    buggy = _buggy(tmp_path, "len-counts-unpinned")
    trace = Trace("strict", 4, 2, (Put((("pinned", b"xx"),), ("pinned",)), Len()))
    for name in ("found.vec", "found"):
        path = tmp_path / name
        traces.write(traces.vector_from_trace(trace, "case", "a pinned key, then len()"), path)
        assert traces.header_format(path) == traces.FORMAT
        assert cli.main(["reproduce", str(path), "--target", str(buggy)]) == 1
        assert f"the trace in {name} " in capsys.readouterr().out
        assert cli.main(["reproduce", str(path)]) == 0
        assert cli.main(["explain", str(path)]) == 0
        assert "len()" in capsys.readouterr().out
    assert traces.header_format(tmp_path / "absent") is None
    endless = tmp_path / "endless.vec"  # one line past the line limit: no header, and not read whole
    endless.write_bytes(b'{"format": "' + b"x" * (traces.file_limits()[0] + 10) + b'"}\n')
    assert traces.header_format(endless) is None
    assert cli.main(["reproduce", str(endless)]) == 2


def test_reproduce_refuses_what_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    assert cli.main(["reproduce", str(other)]) == 2
    assert "neither a trace or vector file (named .jsonl" in capsys.readouterr().err
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"format": "auxspec-trace"\n')
    assert cli.main(["reproduce", str(broken)]) == 2
    assert "broken.jsonl:1" in capsys.readouterr().err
    assert cli.main(["reproduce", str(other), "--raw"]) in (0, 1)  # read as fuzzer bytes when asked


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_minimize_crash_runs_without_the_venv_on_path(tmp_path: Path) -> None:
    crash, buggy = _input(tmp_path), _buggy(tmp_path, "len-counts-unpinned")
    env = dict(os.environ, PATH="/usr/bin:/bin", AUXSPEC_TARGET=str(buggy))
    env.pop("AUXSPEC_FINDINGS", None)
    command = [sys.executable, str(FUZZ / "store_fuzzer.py"), "-minimize_crash=1", "-runs=200"]
    command += [f"-exact_artifact_path={tmp_path / 'minimized'}", str(crash)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=150, check=False)
    output = done.stdout + done.stderr
    assert "No module named" not in output and "not found" not in output, output[-3000:]
    assert "CRASH_MIN" in output, output[-3000:]  # libFuzzer's minimizer ran the harness again
    assert (tmp_path / "minimized").exists(), output[-3000:]
    with pytest.raises(DivergenceFound):
        compare_raw((tmp_path / "minimized").read_bytes(), load_target(str(buggy)))


def compare_raw(data: bytes, target: Target) -> None:
    divergence = compare(decode(data, "strict", target.features), target)
    if divergence is not None:
        raise DivergenceFound(divergence.render())


def test_a_printed_reproduce_command_states_what_it_needs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A harness's reproduce line runs as printed from any directory: a port file by its absolute path, a
    # module target with the directory it was found from (and any PYTHONPATH) on PYTHONPATH.
    from auxspec.drivers import fuzzing

    port = tmp_path / "port.py"
    port.write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv(fuzzing.TARGET_ENV, "port.py")
    assert fuzzing.target_args_from_env() == f"--target {port}"
    assert fuzzing.reproduce_prefix() == ""
    monkeypatch.setenv(fuzzing.TARGET_ENV, "mypkg.store:MyStore")
    monkeypatch.setenv("PYTHONPATH", "src")
    assert fuzzing.reproduce_prefix() == f"PYTHONPATH={tmp_path}{os.pathsep}{tmp_path / 'src'} "
    monkeypatch.delenv(fuzzing.TARGET_ENV)
    assert fuzzing.target_args_from_env() == "" and fuzzing.reproduce_prefix() == f"PYTHONPATH={tmp_path / 'src'} "
