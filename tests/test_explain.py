"""auxspec explain: the timeline is the model's, every committed vector renders
in the terminal and as HTML, a divergence shows both sides, payloads stay short."""

from __future__ import annotations

import io
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from auxspec import cli
from auxspec.engine import traces
from auxspec.engine.codec import decode
from auxspec.engine.expect import expected_outcomes
from auxspec.engine.ops import Get, Put, Trace
from auxspec.models.sequential import Err, Kind, Ok
from auxspec.teach import html, svg, terminal
from auxspec.teach.cli import read_input
from auxspec.teach.timeline import EVICTED, TERMINAL, short_bytes, timeline

VECTORS = Path(cli.__file__).with_name("vectors")
VECTOR_FILES = sorted(VECTORS.rglob("*.jsonl"))
PORTS = Path(__file__).resolve().parent / "ports"
HEX_WALL = re.compile(r"[0-9a-f]{17,}")  # more than 8 bytes of hex in a row


def _keys(row: object) -> list[str]:
    return [slot.key for slot in row.slots]  # type: ignore[attr-defined]


def test_there_are_vectors() -> None:
    assert len(VECTOR_FILES) >= 40


@pytest.mark.parametrize("path", VECTOR_FILES, ids=[str(p.relative_to(VECTORS)) for p in VECTOR_FILES])
def test_every_vector_renders(path: Path) -> None:
    vector = traces.load(path)
    line = timeline(vector.trace, vector.name, vector.description, vector.expected)
    assert len(line.steps) == len(vector.trace.ops)
    # The views end where the spec ends, and no step disagrees with the file.
    for step, (outcome, snapshot) in zip(line.steps, expected_outcomes(vector.trace), strict=True):
        assert step.outcome == outcome and step.recorded is None
        assert [(s.key, s.payload) for s in step.after.slots] == list(snapshot.entries)
        assert step.pins == tuple(snapshot.references)
    text = terminal.plain(line)
    for step in line.steps:
        assert f"step {step.number}/{len(line.steps)}" in text
    assert "\x1b[" not in text and not HEX_WALL.search(text)
    coloured = io.StringIO()
    terminal.show(line, coloured, colour=True, width=120)
    assert "\x1b[" in coloured.getvalue()
    assert coloured.getvalue().count("╭") == len(line.steps)  # one panel per step
    page = html.page(line)
    assert page.count('<section class="step"') == len(line.steps)
    assert page.count("<svg") == len(line.steps)
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # offline
    assert not HEX_WALL.search(page)


def _vector(name: str) -> traces.Vector:
    return traces.load(VECTORS / name)


def test_terminal_order_and_eviction_are_the_models() -> None:
    line = timeline(_vector("strict/terminal-order.jsonl").trace)
    released = line.steps[1]
    assert released.terminal == ("b", "a")
    assert [row.label for row in released.rows] == ["before", "1. pins", "3. terminal", "after"]
    assert _keys(released.after) == ["c", "b", "a"]
    assert all(TERMINAL in s.tags for s in released.after.slots if s.key in "ab")
    evicting = line.steps[2]
    assert [r.key for r in evicting.evicted] == ["c"]
    evict_row = next(row for row in evicting.rows if row.label == "4. evict")
    assert [s.key for s in evict_row.slots if EVICTED in s.tags] == ["c"]
    assert "c" not in _keys(evicting.after)
    assert evicting.protected == ("d",)


def test_pins_before_data_are_shown_unstored() -> None:
    trace = Trace("strict", 4, 2, (Put((), ("x",)), Put((("x", b"xx"),))))
    first, second = timeline(trace).steps
    assert first.after.unstored == (("x", 1),) and not first.after.slots
    assert any("pins come before data" in note for note in first.notes)
    assert second.after.slots[0].pins == 1 and second.after.unstored == ()


def test_capacity_failure_in_both_profiles() -> None:
    ops = (
        Put((("a", b"aa"), ("b", b"bb")), ("a",)),
        Put((("b", b"bb"), ("c", b"cc"), ("d", b"dd")), ("c",), ("a",)),
    )
    strict, upstream = (timeline(Trace(p, 4, 2, ops)).steps[1] for p in ("strict", "upstream"))
    for step in (strict, upstream):
        assert step.outcome == Err(Kind.CAPACITY)
        assert any("too few can be evicted" in note for note in step.notes)
    assert _keys(strict.after) == ["a", "b"] and strict.pins == (("a", 1),)
    # upstream keeps the moves and the pins (the release of a, the retain of c); only new keys go
    assert _keys(upstream.after) == ["b", "a"] and upstream.pins == (("c", 1),)


def test_payloads_are_short() -> None:
    assert short_bytes(b"") == "0 B"
    assert short_bytes(b"\x01\x02") == "2 B 0102"
    assert short_bytes(bytes(range(10))) == "10 B 00010203…"
    assert short_bytes(b"\xab" * 4096) == "4096 B ab×4096"
    big = bytes(range(256)) * 16
    line = timeline(Trace("strict", 8192, 4096, (Put((("k", big),)), Get(("k",)))))
    text = terminal.plain(line)
    assert "4096 B 00010203…" in text and not HEX_WALL.search(text)


def test_svg_marks_evicted_keys() -> None:
    line = timeline(_vector("strict/lru-evicts-least-recent.jsonl").trace)
    evicting = next(step for step in line.steps if step.evicted)
    drawn = svg.step_svg(evicting, line.capacity, standalone=True)
    for reason in evicting.evicted:
        assert 'class="slot evicted' in drawn and f'data-key="{reason.key}"' in drawn
    assert drawn.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    quiet = next(step for step in line.steps if not step.evicted)
    assert "evicted" not in svg.step_svg(quiet).replace("data-evicted", "")


def _buggy_port(tmp_path: Path, bug: str) -> Path:
    path = tmp_path / "port.py"
    path.write_text(
        f"import sys\nsys.path.insert(0, {str(PORTS)!r})\n"
        f"from simple_port import make\nBlockObjectStore = make({bug!r})\n"
    )
    return path


def test_cli_plain_text_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.html"
    assert cli.main(["explain", str(VECTORS / "strict/terminal-order.jsonl"), "--html", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "\x1b[" not in printed  # not a terminal: plain text
    assert "step 3/5" in printed and "evicted: c" in printed
    assert f"HTML written to {out}" in printed
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and 'data-evicted="c"' in page


def test_a_divergence_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _buggy_port(tmp_path, "no-read-refresh")
    vector = VECTORS / "strict/read-refreshes-recency.jsonl"
    out = tmp_path / "d.html"
    assert cli.main(["explain", str(vector), "--target", str(port), "--html", str(out)]) == 1
    printed = capsys.readouterr().out
    assert re.search(r"diverges at step \d", printed)
    marked = [line for line in printed.splitlines() if "<- first difference" in line]
    assert len(marked) == 1 and marked[0].strip().startswith("recency")
    page = out.read_text()
    assert page.count('class="first"') == 1 and 'data-field="recency (least → most)"' in page


def test_a_constructor_divergence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = tmp_path / "lenient.py"
    port.write_text(
        "from auxstore import BlockObjectStore as Strict\n"
        "class BlockObjectStore(Strict):\n"
        "    def __init__(self, *, max_bytes, object_nbytes):\n"
        "        super().__init__(max_bytes=max(max_bytes, object_nbytes), object_nbytes=object_nbytes)\n"
    )
    out = tmp_path / "c.html"
    assert (
        cli.main(["explain", str(VECTORS / "strict/new-too-small.jsonl"), "--target", str(port), "--html", str(out)])
        == 1
    )
    printed = capsys.readouterr().out
    assert "diverges when the store is built" in printed
    marked = next(line for line in printed.splitlines() if "<- first difference" in line)
    assert marked.split() == ["constructor", "error:", "config", "ok", "<-", "first", "difference"]
    assert 'data-field="constructor"' in out.read_text()


def test_the_bundled_store_agrees(capsys: pytest.CaptureFixture[str]) -> None:
    vector = VECTORS / "strict/terminal-order.jsonl"
    assert cli.main(["explain", str(vector), "--target"]) == 0
    assert "auxstore:BlockObjectStore agrees with the spec at every step" in capsys.readouterr().out


def test_verify_points_to_explain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _buggy_port(tmp_path, "evict-most-recent")
    found = tmp_path / "found.jsonl"
    argv = ["verify", str(port), "--max-time", "20", "--seed", "3", "--out", str(found), "--large-stores", "off"]
    assert cli.main(argv) == 1
    printed = capsys.readouterr().out
    joined = printed.replace(" \\\n    ", " ")  # a long command is continued over lines
    pointer = next(line for line in joined.splitlines() if line.startswith("explain:"))
    assert f" explain {found} --target {port}" in pointer
    # The divergence file explains without a target (saying how to add one) and with it.
    assert cli.main(["explain", str(found)]) == 0
    assert "written by auxspec verify" in capsys.readouterr().out
    assert cli.main(["explain", str(found), "--target", str(port)]) == 1
    assert "<- first difference" in capsys.readouterr().out


def test_a_fuzzer_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = bytes([1, 2, 0, 3, 0, 1, 1, 0, 0, 17, 1, 2, 7, 0])
    crash = tmp_path / "crash-1234"
    crash.write_bytes(data)
    given = read_input(crash)
    assert given.trace == decode(data)
    assert cli.main(["explain", str(crash)]) == 0
    printed = capsys.readouterr().out
    assert f"{len(data)} bytes decoded as a fuzzer input" in printed
    assert printed.count("\nstep ") == len(given.trace.ops)


def test_reproduce_points_to_explain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = (Path(__file__).resolve().parents[1] / "impl" / "auxstore" / "_store.py").read_text()
    buggy = tmp_path / "len_store.py"  # len() counts only the unpinned keys
    counted = "        return len(self._lru) + len(self._pinned)\n"
    buggy.write_text(source.replace(counted, "        return len(self._lru)\n"))
    crash = tmp_path / "crash-1"
    crash.write_bytes(traces_input())
    assert cli.main(["reproduce", str(crash), "--target", str(buggy), "--save", str(tmp_path / "regressions")]) == 1
    joined = capsys.readouterr().out.replace(" \\\n    ", " ")  # a long command is continued over lines
    pointer = next(line for line in joined.splitlines() if line.startswith("explain:"))
    written = tmp_path / "regressions" / "crash-1.jsonl"
    assert f" explain {written} --target {buggy}" in pointer
    assert cli.main(["explain", str(written), "--target", str(buggy)]) == 1


def traces_input() -> bytes:
    """A fuzzer input: a pinned key stored, then len()."""
    from auxspec.engine.codec import encode
    from auxspec.engine.ops import Len

    data = encode(Trace("strict", 4, 2, (Put((("a", b"xx"),), ("a",)), Len())))
    assert data is not None
    return data


CORPUS = Path(__file__).resolve().parents[1] / "fuzz" / "corpus"


@pytest.mark.parametrize("harness,profile", [("store", "strict"), ("upstream", "upstream")])
def test_every_committed_fuzzer_input_renders(harness: str, profile: str) -> None:
    inputs = sorted(path for path in (CORPUS / harness).iterdir() if path.is_file())
    assert len(inputs) > 50
    ops = 0
    for path in inputs:
        given = read_input(path, profile)
        assert given.trace == decode(path.read_bytes(), profile)
        line = timeline(given.trace, given.title)
        text = terminal.plain(line).split("\n", 1)[1]  # the title is the file's name, a hash
        assert not HEX_WALL.search(text), path
        assert html.page(line).count('<section class="step"') == len(line.steps)
        ops += len(line.steps)
    assert ops > 10 * len(inputs) / 2  # real traces, not empty ones


def test_bad_files_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"format": "auxspec-trace", "version": 9}\n')
    assert cli.main(["explain", str(broken)]) == 2
    assert "version 9 is not supported" in capsys.readouterr().err
    assert cli.main(["explain", str(tmp_path / "absent.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_an_unbuildable_store() -> None:
    line = timeline(Trace("strict", 1, 2))
    assert line.capacity is None and line.built == Err(Kind.CONFIG) and not line.steps
    assert "not built: error: config" in terminal.plain(line)
    assert "No ops to step through" in html.page(line)


def test_recorded_outcomes_that_disagree_are_flagged() -> None:
    trace = Trace("strict", 4, 2, (Put((("a", b"aa"),)), Get(("a",))))
    line = timeline(trace, recorded=(Ok(), Ok(b"zz")))
    assert line.steps[0].recorded is None and line.steps[1].recorded == Ok(b"zz")
    assert "the file is stale" in terminal.plain(line)


def test_colour_follows_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    line = timeline(_vector("strict/terminal-order.jsonl").trace)

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    terminal.show(line, tty, width=100)
    assert "\x1b[" in tty.getvalue()
    pipe = io.StringIO()
    terminal.show(line, pipe)
    assert pipe.getvalue() == terminal.plain(line)
    assert sys.stdout is not None


def test_a_background_vector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """explain reads the background vectors verify writes: the owner calls and
    the writer's schedule in order; with --target the scenario runs on that
    store's background class and a violation exits 1."""
    from auxspec.generators.background import Release, Scenario, scenario_vector

    steps = (Put((("k0", b"\0"),)), Release(1), Put((("k1", b"\1"),)), Put((("k2", b"\2"),)), Put((("k3", b"\3"),)))
    scenario = Scenario("strict", 4, 1, 2, steps)
    path = tmp_path / "bg.jsonl"
    path.write_text(traces.dumps_background(scenario_vector(scenario, "bg", "made by a test")), encoding="utf-8")
    assert cli.main(["explain", str(path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    listed = [row.strip() for row in rows if row.lstrip()[:2] in ("1.", "2.", "3.", "4.", "wr")]
    assert listed == [
        "1. put(['k0'=00])",
        "writer: may apply 1 more batch(es) to the inner store",
        "2. put(['k1'=01])",
        "3. put(['k2'=02])",
        "4. put(['k3'=03])",
    ]
    assert cli.main(["explain", str(path), "--target"]) == 0
    assert "agrees with the background spec" in capsys.readouterr().out
    port = PORTS / "subtle" / "h_close_drops_queued.py"
    assert cli.main(["explain", str(path), "--target", str(port)]) == 1
    assert "close() returned when the writer had applied" in capsys.readouterr().out


def test_explain_of_a_wide_store_prints_no_line_past_160(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A large-store catch's vector (a put of 1,096 objects, a read of many)
    printed lines of 63 KB (issue 28 point 5): every line is cut to 160
    characters, payloads shown by their length, unless --verbose."""
    objects = tuple((f"L{index:04d}-{'k' * 24}", bytes([index % 251]) * 64) for index in range(1096))
    keys = tuple(key for key, _ in objects[:300])
    trace = Trace("strict", 1096 * 64, 64, (Put(objects), Get(keys), Put((("M", bytes(64)),))))
    path = tmp_path / "wide.jsonl"
    traces.write(traces.vector_from_trace(trace, "wide"), path)
    assert cli.main(["explain", str(path), "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "1,032 more" in out and max(map(len, out.splitlines())) <= 160
    assert cli.main(["explain", str(path), "--color", "always"]) == 0
    coloured = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert max(map(len, coloured.splitlines())) <= 160
    assert cli.main(["explain", str(path), "--color", "never", "--verbose"]) == 0
    assert max(map(len, capsys.readouterr().out.splitlines())) > 160  # whole, as asked


def test_a_call_repeated_with_the_same_picture_is_one_step(capsys: pytest.CaptureFixture[str]) -> None:
    # A trace file's "times": 39 is 39 steps; drawn once each they would be 39 screens alike.
    put = Put((("a", b"11"),))
    trace = Trace("strict", 6, 2, (put,) * 40 + (Get(("a",)),) * 30 + (Put((("b", b"22"),)),))
    line = timeline(trace)
    shown = [body[0] for _, body in terminal.folded(line)]
    titles = ["".join(text for text, _ in title) for title in shown]
    assert [title.split("  ")[0] for title in titles] == ["step 1/71", "steps 2-40/71", "steps 41-70/71", "step 71/71"]
    assert titles[1].endswith("× 39") and titles[2].endswith("× 30")
    text = terminal.plain(line)
    assert len(text.splitlines()) < 40 and "steps 2-40/71" in text
    # The step that diverges is never folded: it is shown alone, with the run before it folded.
    apart = terminal.folded(replace(line, diverges_at=20))
    assert [step.number for step, _ in apart] == [1, 2, 20, 21, 41, 71]
