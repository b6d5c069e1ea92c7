"""Bounded memory for every reader (issue 18, point 6): a line past the
limit (``auxspec.engine.traces.MAX_LINE``, 16 MiB) is refused without reading
the rest, in trace and vector files, in ``serve``'s requests and in a port's
answers; an endless stream ends at the first line; a long vector file is
read one line at a time.

Peak memory is measured inside a fresh interpreter, as its own high-water
mark (``VmHWM`` of /proc/self/status, in KiB), so nothing else this test
process holds counts; ``resource.getrusage``'s ``ru_maxrss`` is printed
beside it (Linux carries that one over from the forking process). The 1 GiB inputs are sparse files or streams:
they take no disk and no memory to make.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from auxspec.engine import traces

PY = sys.executable
BENT = Path(__file__).parent / "ports" / "bent_port.py"
LIMIT_KIB = 100 * 1024  # peak RSS allowed: 100 MB
HEADER = {"format": "auxspec-trace", "version": 1, "name": "long", "profile": "strict", "max_bytes": 4,
          "object_nbytes": 2}  # fmt: skip

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB and /dev/zero: Linux")


def _peak(code: str, stdin: str | None = None) -> tuple[int, str]:
    """Run ``code`` in a fresh interpreter; its peak RSS in KiB and what it printed."""
    script = textwrap.dedent(code) + textwrap.dedent(
        """
        import resource
        # VmHWM: the peak of this process's own memory since its exec.
        # ru_maxrss would do, but Linux carries it over from the process
        # that forked this one (a big pytest-xdist worker), so it is shown only.
        status = open("/proc/self/status").read()
        hwm = int(status.split("VmHWM:", 1)[1].split()[0])
        print("MAXRSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        print("PEAK", hwm)
        """
    )
    with open(stdin or "/dev/null", "rb") as source:
        done = subprocess.run(
            [PY, "-c", script], stdin=source, capture_output=True, text=True, timeout=300, check=False
        )
    assert done.returncode == 0, done.stderr
    peak = int(done.stdout.rsplit("PEAK", 1)[1])
    return peak, done.stdout + done.stderr


def _sparse(path: Path, size: int, head: str = "") -> Path:
    with path.open("wb") as file:
        file.write(head.encode())
        file.truncate(size)  # the rest is a hole of NUL bytes, with no newline
    return path


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["header", "op line"])
def test_a_1_gib_line_in_a_vector_file_is_refused(tmp_path: Path, where: str) -> None:
    head = "" if where == "header" else json.dumps(HEADER) + "\n"
    path = _sparse(tmp_path / "huge.jsonl", 1 << 30, head)
    peak, out = _peak(
        f"""
        import sys
        from auxspec import cli
        code = cli.main(["verify", "--vectors", {str(path)!r}, "--max-time", "0"])
        print("CODE", code)
        """
    )
    line = 1 if where == "header" else 2
    assert "CODE 2" in out and f"huge.jsonl:{line}: line longer than 16777216 bytes" in out, out
    assert peak < LIMIT_KIB, f"peak RSS {peak} KiB"
    print(f"peak RSS {peak} KiB")


@pytest.mark.timeout(300)
def test_dev_zero_as_vectors_is_refused() -> None:
    peak, out = _peak(
        """
        from auxspec import cli
        print("CODE", cli.main(["verify", "--vectors", "/dev/zero", "--max-time", "0"]))
        """
    )
    assert "CODE 2" in out and "/dev/zero:1: line longer than" in out, out
    assert peak < LIMIT_KIB, f"peak RSS {peak} KiB"
    print(f"peak RSS {peak} KiB")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("source", ["/dev/zero", "1 GiB file"])
def test_serve_refuses_an_endless_request_line(tmp_path: Path, source: str) -> None:
    stdin = "/dev/zero" if source == "/dev/zero" else str(_sparse(tmp_path / "req", 1 << 30, '{"id": 1, "op": "new'))
    peak, out = _peak(
        """
        from auxspec.drivers.protocol import main_serve
        print("CODE", main_serve(None))
        """,
        stdin=stdin,
    )
    assert "CODE 3" in out and "request line 1: longer than the protocol's 16777216 bytes" in out, out
    assert peak < LIMIT_KIB, f"peak RSS {peak} KiB"
    print(f"peak RSS {peak} KiB")


@pytest.mark.timeout(300)
def test_a_100_mb_answer_is_refused_without_reading_it_all() -> None:
    peak, out = _peak(
        f"""
        from auxspec.drivers.protocol import ProtocolError, process_target
        made = process_target({f"{shlex.quote(PY)} {shlex.quote(str(BENT))} huge-answer 3"!r}, 30.0)
        store = made.target.factory(4, 2)
        try:
            store.get_concatenated([])
        except ProtocolError as error:
            print("BROKE", error)
        made.close()
        """
    )
    assert "BROKE an answer line is longer than the protocol's 16777216 bytes" in out, out
    assert peak < LIMIT_KIB, f"peak RSS {peak} KiB"
    print(f"peak RSS {peak} KiB")


def _long_vector(path: Path, lines: int) -> Path:
    with path.open("w") as file:
        file.write(json.dumps(HEADER) + "\n")
        put = json.dumps({"op": "put", "objects": [["a", "0a0b"]], "retain": [], "release": [], "expect": {"ok": None}})
        get = json.dumps({"op": "get", "keys": ["a"], "expect": {"ok": "0a0b"}})
        for number in range(lines):
            file.write((put if number % 2 == 0 else get) + "\n")
    return path


@pytest.mark.timeout(300)
def test_a_long_vector_streams_in_memory_independent_of_its_length(tmp_path: Path) -> None:
    # scan() yields one op at a time: reading ten times the lines must not
    # take more memory (a whole-file read would add tens of MB).
    peaks = {}
    for lines in (20_000, 200_000):
        path = _long_vector(tmp_path / f"v{lines}.jsonl", lines)
        peak, out = _peak(
            f"""
            from pathlib import Path
            from auxspec.engine import traces
            header, ops = traces.scan(Path({str(path)!r}))
            print("OPS", sum(1 for _ in ops))
            """
        )
        assert f"OPS {lines}" in out
        peaks[lines] = peak
    assert peaks[200_000] - peaks[20_000] < 4 * 1024, peaks  # KiB
    print(f"peak RSS scanning 20k lines: {peaks[20_000]} KiB; 200k lines: {peaks[200_000]} KiB")


@pytest.mark.timeout(300)
def test_verify_replays_a_long_vector_in_memory_independent_of_its_length(tmp_path: Path) -> None:
    # ``auxspec verify --vectors`` surveys the file (one op at a time) and then
    # streams its ops through the one compare loop: thirty times the lines
    # must not take more memory. Holding the ops (as before) cost about 30 B
    # per op: some 9 MB more for the longer file.
    peaks, seconds = {}, {}
    for lines in (10_000, 300_000):
        path = _long_vector(tmp_path / f"v{lines}.jsonl", lines)
        peak, out = _peak(
            f"""
            import time
            from auxspec import cli
            started = time.process_time()
            code = cli.main(["verify", "--vectors", {str(path)!r}, "--max-time", "0"])
            print("CODE", code, "CPU", round(time.process_time() - started, 1))
            """
        )
        assert "CODE 0" in out and "1 vectors replayed" in out, out
        peaks[lines], seconds[lines] = peak, out.split(" CPU ", 1)[1].split()[0]
    print(f"verify: peak RSS {peaks} KiB, CPU seconds {seconds}")
    assert peaks[300_000] - peaks[10_000] < 2 * 1024, peaks  # KiB: flat within 2 MiB


@pytest.mark.timeout(300)
def test_vectors_check_reads_a_long_vector_in_memory_independent_of_its_length(tmp_path: Path) -> None:
    # ``auxspec vectors --check`` streams each file into the spec's walk (and
    # the coverage measurement) too.
    peaks = {}
    for lines in (10_000, 200_000):
        folder = tmp_path / f"v{lines}"
        folder.mkdir()
        _long_vector(folder / "long.jsonl", lines)
        peak, out = _peak(
            f"""
            from auxspec import cli
            print("CODE", cli.main(["vectors", "--check", {str(folder)!r}, "--min-coverage", "0"]))
            """
        )
        assert "CODE 0" in out and "1 vectors, 1 match the spec" in out, out
        peaks[lines] = peak
    print(f"vectors --check: peak RSS {peaks} KiB")
    assert peaks[200_000] - peaks[10_000] < 2 * 1024, peaks  # KiB


def test_vectors_check_names_the_first_stale_op_of_a_long_vector(tmp_path: Path) -> None:
    from auxspec import vectors as bundled
    from auxspec.drivers import verify

    path = _long_vector(tmp_path / "long.jsonl", 5_000)
    lines = path.read_text().splitlines(keepends=True)
    lines[4_000] = lines[4_000].replace('"ok": "0a0b"', '"ok": "0a0c"')  # op 4,000: a get, recorded wrong
    path.write_text("".join(lines))
    assert bundled.stale(verify.survey_vectors([path])) == [
        "long: op 4000 expects Ok(value=b'\\n\\x0c'), the spec says Ok(value=b'\\n\\x0b')"
    ]


def _late_wrong_port(path: Path, after: int) -> Path:
    path.write_text(
        textwrap.dedent(
            f"""
            from auxstore import BlockObjectStore as Base

            class BlockObjectStore(Base):
                # Right until its {after}th read, then one byte wrong.
                reads = 0

                def get_concatenated(self, keys):
                    self.reads += 1
                    data = super().get_concatenated(keys)
                    return data if self.reads < {after} or not data else b"\\xff" + data[1:]
            """
        )
    )
    return path


def test_a_streamed_replay_reports_a_divergence_as_the_whole_trace_does(tmp_path: Path) -> None:
    from auxspec.drivers import verify
    from auxspec.engine.compare import compare
    from auxspec.engine.target import load_target

    vector = _long_vector(tmp_path / "v.jsonl", 3_000)
    target = load_target(str(_late_wrong_port(tmp_path / "late.py", 700)))
    held = compare(traces.load(vector).trace, target)
    streamed = verify.replay_file(traces.survey(vector), target)
    assert held is not None and streamed is not None
    assert streamed.step == held.step == 1_399  # the 700th get: op 1,400 of 3,000
    assert len(streamed.trace.ops) == 1_400  # the ops up to it, read again; not the 1,600 after it
    assert streamed.render() == held.render()
    assert "divergence at step 1400 of 3000:" in streamed.render()
    assert streamed.as_json() == held.as_json()
    assert verify.replay_file(traces.survey(vector), load_target(None)) is None


def test_scan_and_load_agree(tmp_path: Path) -> None:
    path = _long_vector(tmp_path / "v.jsonl", 50)
    header, ops = traces.scan(path)
    vector = traces.load(path)
    pairs = list(ops)
    assert tuple(op for op, _ in pairs) == vector.trace.ops
    assert tuple(outcome for _, outcome in pairs) == vector.expected
    assert header.name == vector.name == "long"


# ------------------------------------------------------ nothing left behind


@pytest.mark.timeout(300)
def test_verify_in_an_empty_directory_leaves_it_empty(tmp_path: Path) -> None:
    # Issue 18, point 7: an exploring verify that conforms writes nothing
    # where it runs (no .hypothesis/ database, no trace file).
    empty = tmp_path / "here"
    empty.mkdir()
    auxspec = Path(PY).parent / "auxspec"
    done = subprocess.run(
        [str(auxspec), "verify", "--max-time", "3", "--seed", "1"],
        cwd=empty, capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "conforms" in done.stdout and "explored" in done.stdout, done.stdout[-2000:]
    assert sorted(path.name for path in empty.iterdir()) == []
