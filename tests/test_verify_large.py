"""verify's large-store phase (``--large-stores``; generators/large.py): the
planted ports of tests/ports/large, correct on every store under 1 or 2 GiB,
are flagged by ``verify --max-time 10``; the bundled store conforms; ``off``
skips the phase and says so; the report records it; the watchdog turns a
trace that hangs or grows without bound into the port's failure.

Memory: the default large store (330 MB) peaks under 1 GB; each test marked
``large_memory`` builds a 2.2 GB store next to the spec's 2.2 GB of payloads,
about 4.5 GB at its peak, and a planted port's catch, shrunk on that store and
replayed from its vector, 6.4-8.7 GB (docs/verifying-a-port.md): they run in the long
tier (``make test-all``), one at a time (they are in one file, so xdist's
loadfile keeps them on one worker).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from auxspec import cli
from auxspec.drivers import verify
from auxspec.engine import traces
from auxspec.engine.ops import Get, Put, Trace
from auxspec.engine.target import load_target
from auxspec.generators import large

PORTS = Path(__file__).resolve().parent / "ports" / "large"
SCHEMA = Path(cli.__file__).with_name("schemas") / "verify-report.schema.json"
large_memory = pytest.mark.large_memory


def _report(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    code = cli.main(["verify", *argv, "--json"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))
    return code, report


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("size", "ops"),
    [
        pytest.param([], 70, id="default-330MB"),  # what verify runs unless told: under 1 GB of memory
        pytest.param(["--large-bytes", str(large.FULL_BYTES)], 300, id="2.2GB", marks=large_memory),
    ],
)
def test_the_bundled_store_conforms_with_the_large_phase(
    size: list[str], ops: int, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, report = _report(capsys, ["--max-time", "10", "--seed", "11", "--out", str(tmp_path / "d.jsonl"), *size])
    assert code == 0, report
    phase = report["large_stores"]
    assert phase["ran"] is True and phase["seed"] == 11
    assert phase["bytes"] == (large.FULL_BYTES if size else large.DEFAULT_BYTES)
    assert phase["traces"] >= 1 and phase["ops"] > ops, phase
    assert report["scope"]["phases"]["large"]["ops"] == phase["ops"]
    print(f"large-store phase: {phase['seconds']} s")


def test_a_large_store_crosses_its_two_highest_powers_of_two() -> None:
    for store_bytes, high in ((large.DEFAULT_BYTES, 28), (large.FULL_BYTES, 31), (large.MIN_CAPACITY * 1_000_003, 26)):
        where = large.Geometry.of(store_bytes)
        assert where.high == high, (store_bytes, where)
        for power, slot in ((high - 1, where.straddle_low), (high, where.straddle_high)):
            first, end = slot * large.OBJECT_NBYTES, (slot + 1) * large.OBJECT_NBYTES
            assert first < 1 << power < end  # the slot straddles the power of two
        assert where.capacity - where.past >= large.PAST  # objects wholly past the higher one
    with pytest.raises(ValueError, match="at least"):
        large.Geometry.of(large.MIN_CAPACITY * large.OBJECT_NBYTES - 1)
    full = large.Geometry.of(large.FULL_BYTES)  # the store the planted ports need: past 2^30 and 2^31
    assert (full.straddle_low, full.straddle_high, full.capacity) == (1073, 2147, 2200)


@large_memory
@pytest.mark.timeout(600)  # the phase, then the shrink's 40 candidates or 180 s, each filling the 2.2 GB store
@pytest.mark.parametrize("port", ["wrap31", "chunk_run"])
def test_each_planted_port_is_flagged_only_with_the_large_phase(
    port: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = str(PORTS / f"{port}.py")
    out = tmp_path / "d.jsonl"
    # Correct on every store the rest of verify builds: the bug needs the large store.
    argv = [path, "--max-time", "10", "--seed", "11", "--out", str(out), "--large-bytes", str(large.FULL_BYTES)]
    code, report = _report(capsys, [*argv, "--large-stores", "off"])
    assert code == 0, report
    started = time.monotonic()
    code, report = _report(capsys, argv)
    elapsed = time.monotonic() - started
    assert code == 1, report
    assert report["result"] == "diverges"
    phase = report["large_stores"]
    assert phase["ran"] is True
    assert phase["divergence"]["step"] >= report["step"] == report["shrink"]["to_ops"] > 0  # found, then shrunk
    assert "--large-stores on" in phase["reproduce"] and "--seed 11" in phase["reproduce"]
    assert f"--large-bytes {large.FULL_BYTES}" in phase["reproduce"]
    # Shrunk and written as any catch is, its payloads in parts: megabytes, not gigabytes.
    assert report["found_by"].startswith("the large-store phase") and report["trace"] == str(out)
    assert out.stat().st_size < traces.MAX_FILE and json.loads(out.read_text().split("\n")[0])["version"] == 3
    shrunk = report["shrink"]
    print(f"{port}: flagged in {elapsed:.1f} s at {phase['divergence']['call'][:60]}; shrunk {shrunk}")


def test_off_skips_the_phase_and_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = str(tmp_path / "d.jsonl")
    assert cli.main(["verify", "--max-time", "10", "--seed", "1", "--large-stores", "off", "--out", out]) == 0
    assert "large stores: skipped, turned off (--large-stores off)" in capsys.readouterr().out
    code, report = _report(capsys, ["--max-time", "2", "--seed", "1", "--out", out])
    assert code == 0
    assert report["large_stores"] == {"ran": False, "skipped": report["large_stores"]["skipped"]}
    assert "--max-time is below 10" in report["large_stores"]["skipped"]
    assert "large" not in report["scope"]["phases"]


HANGING = """
import time
from auxstore import BlockObjectStore as _Good

class BlockObjectStore(_Good):
    def put(self, objects, **pins):
        objects = list(objects)
        if any(obj.key == "{key}" for obj in objects):
            {body}
        return super().put(objects, **pins)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("while True: pass", "ran longer than 1 s"),  # a port that never returns
        # Fresh mappings, written: bytearrays could reuse heap an earlier test freed (the default large
        # store's payloads, in the same worker) and leave the resident size where it was.
        ("import mmap; held = [mmap.mmap(-1, 1 << 20) for _ in range(200)]; "
         "[m.write(b'x' * (1 << 20)) for m in held]; time.sleep(60)", "memory grew by"),
    ],
)
def test_the_watchdog_makes_a_stuck_trace_the_ports_failure(
    body: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A small trace in place of the 2.2 GB ones: the watchdog does not depend on their size.
    trace = Trace("strict", 64, 8, (Put((("a", bytes(8)),)), Put((("b", bytes(8)),)), Get(("a",))))
    monkeypatch.setattr(large, "traces", lambda *_: [large.LargeTrace("small", lambda: trace)])
    port = tmp_path / "stuck.py"
    port.write_text(HANGING.format(key="b", body=body))
    started = time.monotonic()
    run = verify.explore_large(load_target(str(port)), "strict", 1, watch_seconds=1.0, watch_rss=100 << 20)
    assert time.monotonic() - started < 30
    assert run.divergence is not None and run.trace == "small"
    assert run.divergence.step == 1  # the second put, the one that hangs
    assert said in run.divergence.actual


# A port whose reads of slots past 2^26 bytes wrap (as a 26-bit offset
# would): the smallest large store (80 objects, past 2^25 and 2^26) catches it.
WRAP26 = """
from auxstore import BlockObjectStore as _Good

WRAP = 1 << 26

class BlockObjectStore(_Good):
    def _parts(self, slots):
        nbytes = self._object_nbytes
        if len(self._chunks) > 1 or all((s + 1) * nbytes <= WRAP for s in slots):
            return super()._parts(slots)
        return [self._base[(s * nbytes) % WRAP : (s * nbytes) % WRAP + nbytes] for s in slots]
"""


@pytest.mark.timeout(120)
def test_a_large_store_catch_is_shrunk_written_and_replayed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    port, out = tmp_path / "wrap26.py", tmp_path / "d.jsonl"
    port.write_text(WRAP26)
    smallest = str(large.MIN_CAPACITY * large.OBJECT_NBYTES)
    argv = [str(port), "--max-time", "0", "--large-stores", "on", "--large-bytes", smallest, "--seed", "1"]
    code, report = _report(capsys, [*argv, "--out", str(out)])
    assert code == 1 and report["found_by"].startswith("the large-store phase"), report
    assert report["shrink"]["to_ops"] < report["shrink"]["from_ops"]
    assert report["shrink"]["tries"] <= verify.LARGE_TRIES
    assert report.get("replays", True)
    header = json.loads(out.read_text().split("\n")[0])
    assert header["version"] == traces.COMPACT_VERSION
    assert out.stat().st_size < 4 << 20  # tens of MB of payloads in a file of under 4 MB
    written = traces.load(out)
    assert written.trace.ops == report_ops(report)
    assert cli.main(["reproduce", str(out), "--target", str(port)]) == 1
    shown = capsys.readouterr().out
    assert "first differs at offset" in shown and len(shown) < 20_000
    assert cli.main(["explain", str(out), "--target", str(port)]) == 1
    shown = capsys.readouterr().out
    assert "1000003 B" in shown and len(shown) < 100_000  # payloads by length and first bytes, never whole


def report_ops(report: dict[str, Any]) -> tuple[Any, ...]:
    """The ops of a report's divergence, read back through the vector codec (compact payloads too)."""
    expand = traces.Expander()
    return tuple(traces.op_from_json(row["op"], "report", expand) for row in report["divergence"]["ops"])
