"""What ``auxspec verify`` shows a port author: divergences side by side with
the differing fields marked, big payloads as an offset and a hex window,
1-based steps in the text and in ``--json`` (structured, and valid against
the shipped schema), ``--keep-going`` over every failing vector, and odd
targets judged cleanly or in one line naming the method, never with a
traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from auxspec import cli
from auxspec.engine import traces
from auxspec.engine.compare import compare
from auxspec.engine.ops import Get, Put, ReadInto, Stats, Trace
from auxspec.engine.target import load_target

SCHEMA = Path(cli.__file__).with_name("schemas") / "verify-report.schema.json"
N = 8192

# Flips one byte, 4000 bytes into the last object of any read over 8 KiB.
FLIP = """
import auxstore


class BlockObjectStore(auxstore.BlockObjectStore):
    def get_concatenated(self, keys):
        data = bytearray(super().get_concatenated(keys))
        if len(data) > 8192:
            data[len(data) - self.object_nbytes + 4000] ^= 0xFF
        return bytes(data)
"""
# Reads several keys in the reverse order: many vectors fail.
REVERSED = """
import auxstore


class BlockObjectStore(auxstore.BlockObjectStore):
    def get_concatenated(self, keys):
        return super().get_concatenated(list(keys)[::-1])
"""


def _port(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return path


def _big_trace() -> Trace:
    counting = bytes(range(256)) * (N // 256)
    other = bytes(i * 7 % 256 for i in range(N))
    return Trace("strict", 4 * N, N, (Put((("a", counting),)), Put((("b", other),)), Get(("a", "b"))))


def test_a_divergence_on_8_kib_objects_prints_under_40_lines_with_the_offset_marked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _port(tmp_path, "flip", FLIP)
    divergence = compare(_big_trace(), load_target(str(port)))
    assert divergence is not None
    text = divergence.render()
    assert len(text.splitlines()) < 40 and len(text) < 3000, text
    assert "first differs at offset 12192 (object 2, key 'b', byte 4000)" in text
    # The window shows the differing byte in brackets on both lines, the rest equal.
    windows = re.findall(r"(expected|actual) +@(\d+) +(.*)", text)
    assert [w[0] for w in windows] == ["expected", "actual"]
    start = int(windows[0][1])
    cells = [w[2].split(" ") for w in windows]
    marked = [i for i, cell in enumerate(cells[0]) if cell.startswith("[")]
    assert marked == [12192 - start] == [i for i, cell in enumerate(cells[1]) if cell.startswith("[")]
    want_byte = (4000 * 7) % 256
    assert cells[0][marked[0]] == f"[{want_byte:02x}]" and cells[1][marked[0]] == f"[{want_byte ^ 0xFF:02x}]"
    unmarked = [[c for i, c in enumerate(line) if i != marked[0]] for line in cells]
    assert unmarked[0] == unmarked[1]
    # The differing field is starred; the equal ones are not.
    marks = dict((name, mark) for mark, name in re.findall(r"^  ([* ]) (outcome|stored|pins|closed) ", text, re.M))
    assert marks == {"outcome": "*", "stored": " ", "pins": " ", "closed": " "}

    # The whole run of verify on the vector, not only the divergence, stays short.
    vector = tmp_path / "big.jsonl"
    traces.write(traces.vector_from_trace(_big_trace(), "big"), vector)
    argv = ["verify", str(port), "--vectors", str(vector), "--max-time", "0", "--out", str(tmp_path / "d.jsonl")]
    code = cli.main(argv)
    out = capsys.readouterr().out
    assert code == 1
    assert len(out.splitlines()) < 40, out
    assert "12192" in out


def _json_report(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any], str]:
    code = cli.main([*argv, "--json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out.strip().splitlines()[-1])
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))
    return code, report, captured.err


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def test_json_reports_are_structured_valid_and_count_steps_from_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, _ = _json_report(capsys, ["verify", "auxspec:ReferenceStore", "--max-time", "1", "--seed", "1"])
    assert code == 0 and report["result"] == "conforms"

    port = _port(tmp_path, "reversed", REVERSED)
    out = tmp_path / "d.jsonl"
    code, report, text = _json_report(
        capsys, ["verify", str(port), "--keep-going", "--max-time", "2", "--seed", "1", "--out", str(out)]
    )
    assert code == 1 and report["result"] == "diverges"
    failing = report["failing_vectors"]
    assert len(failing) >= 3, [f["name"] for f in failing]
    for found in failing:
        divergence = found["divergence"]
        # 1-based, as the text says it: the marked op is the step'th.
        assert divergence["ops"][-1]["step"] == divergence["step"] >= 1
        assert f"divergence at step {divergence['step']} of {divergence['steps']}" in text
        assert divergence["expected"] != divergence["actual"] and divergence["differs"]
        if divergence["differs"] == ["stored"]:
            assert divergence["expected"]["state"]["stored"] != divergence["actual"]["state"]["stored"]
    # No Python reprs anywhere: outcomes are {"ok": hex} / {"error": kind}, states are objects.
    for value in _strings(report):
        assert not re.match(r"^(b'|b\"|Ok\(|Err\(|StoreSnapshot\(|\{'error')", value), value
    # The summary names every failing vector.
    summary = text[text.index("summary: ") :]
    assert f"summary: {len(failing)} of {report['vectors']} vectors fail:" in summary
    for found in failing:
        differs = ", ".join(found["divergence"]["differs"])
        assert f"  {found['name']}: step {found['divergence']['step']} ({differs} differs)" in summary


def test_keep_going_off_stops_at_the_first_failing_vector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _port(tmp_path, "reversed", REVERSED)
    code, report, text = _json_report(capsys, ["verify", str(port), "--max-time", "1", "--out", str(tmp_path / "d")])
    assert code == 1 and report["failing_vectors"] == [] and report["divergence"]["step"] == report["step"]
    assert text.count("divergence at step") == 1


# ----------------------------------------------------------- odd targets

ODD = """
import auxstore


class BlockObjectStore(auxstore.BlockObjectStore):
{body}
"""

CLEAN = {
    "snapshot as a list of lists": (
        "    def snapshot(self):\n"
        "        s = super().snapshot()\n"
        "        return [[list(e) for e in s.entries], [list(r) for r in s.references], s.closed]\n"
    ),
    "snapshot as a plain tuple with bytearray payloads and dict-ordered references": (
        "    def snapshot(self):\n"
        "        s = super().snapshot()\n"
        "        refs = dict(reversed(s.references))\n"
        "        return (tuple((k, bytearray(p)) for k, p in s.entries), tuple(refs.items()), s.closed)\n"
    ),
    "get_concatenated returning a bytearray": (
        "    def get_concatenated(self, keys):\n        return bytearray(super().get_concatenated(keys))\n"
    ),
    "stats as a dict": (
        "    def stats(self):\n"
        "        s = super().stats()\n"
        "        return {name: getattr(s, name) for name in dir(s) if not name.startswith('_')"
        " and isinstance(getattr(s, name), int)}\n"
    ),
}

ONE_LINE = {
    "get_concatenated returning str": (
        "    def get_concatenated(self, keys):\n        return super().get_concatenated(keys).hex()\n",
        Get(("a",)),
        "get_concatenated() returned str '",
    ),
    "read_into returning None": (
        "    def read_into(self, keys, buffer):\n        super().read_into(keys, buffer)\n",
        ReadInto(("a",), 2),
        "read_into() returned NoneType None, not an int",
    ),
    "read_into returning more than the buffer": (
        "    def read_into(self, keys, buffer):\n        return super().read_into(keys, buffer) + 5\n",
        ReadInto(("a",), 2),
        "read_into() returned 7, outside the buffer's 2 bytes",
    ),
    "stats without a field": (
        "    def stats(self):\n        return {}\n",
        Stats(),
        "stats() returned dict without the field",
    ),
    "snapshot returning an int": (
        "    def snapshot(self):\n        return 42\n",
        Get(("a",)),
        "snapshot() returned int 42, not (entries, references, closed)",
    ),
    "snapshot with a str payload": (
        "    def snapshot(self):\n"
        "        s = super().snapshot()\n"
        "        return ([(k, p.hex()) for k, p in s.entries], s.references, s.closed)\n",
        Get(("a",)),
        "snapshot() entry returned str",
    ),
}


def _odd_port(tmp_path: Path, body: str) -> Path:
    return _port(tmp_path, "odd", ODD.format(body=body))


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_odd_but_usable_returns_compare_cleanly(case: str, tmp_path: Path) -> None:
    target = load_target(str(_odd_port(tmp_path, CLEAN[case])))
    trace = Trace("strict", 4, 2, (Put((("a", b"xy"),), ("a",)), Get(("a",)), ReadInto(("a",), 2), Stats()))
    assert compare(trace, target) is None


@pytest.mark.parametrize("case", sorted(ONE_LINE))
def test_unusable_returns_are_one_line_naming_the_method(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body, op, said = ONE_LINE[case]
    port = _odd_port(tmp_path, body)
    divergence = compare(Trace("strict", 4, 2, (Put((("a", b"xy"),)), op)), load_target(str(port)))
    # A snapshot is read after every op: the first one already shows it.
    assert divergence is not None and divergence.step == (0 if "snapshot" in case else 1)
    assert said in divergence.actual and "\n" not in divergence.actual
    assert "Traceback" not in divergence.render()
    # And through the command: exit 1, no traceback.
    assert cli.main(["verify", str(port), "--max-time", "1", "--seed", "1", "--out", str(tmp_path / "d.jsonl")]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err


def test_a_port_missing_the_optional_methods_is_driven_with_what_it_has(tmp_path: Path) -> None:
    port = _port(
        tmp_path,
        "bare",
        "import auxstore\n\n\nclass BlockObjectStore:\n"
        "    def __init__(self, *, max_bytes, object_nbytes):\n"
        "        self._s = auxstore.BlockObjectStore(max_bytes=max_bytes, object_nbytes=object_nbytes)\n"
        "    def put(self, objects, *, retain_keys=(), release_keys=()):\n"
        "        self._s.put(objects, retain_keys=retain_keys, release_keys=release_keys)\n"
        "    def get_concatenated(self, keys):\n        return self._s.get_concatenated(keys)\n"
        "    def close(self):\n        self._s.close()\n",
    )
    assert cli.main(["verify", str(port), "--max-time", "2", "--seed", "1"]) == 0


def test_the_background_driver_takes_a_list_snapshot_too(tmp_path: Path) -> None:
    from random import Random

    from auxspec.drivers import gated
    from auxspec.generators.background import background_scenario

    port = _odd_port(tmp_path, CLEAN["snapshot as a list of lists"])
    port.write_text(port.read_text() + "\n\nBackgroundBlockObjectStore = auxstore.BackgroundBlockObjectStore\n")
    target = load_target(str(port))
    assert target.background is not None
    rng = Random(3)
    for _ in range(8):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(4, 60)))
        gated.run_scenario(target, background_scenario(data, "strict"))  # a Violation would show the schedule


def test_a_passing_run_prints_one_line_per_phase_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["verify", "auxstore", "--max-time", "3", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    # One screen, with the background phase, the scope lines (the domain line among them) and the large stores' skip.
    assert len(lines) <= 17, out  # 16 when the guided phase got no turn
    assert sum(line.startswith("domain: ") for line in lines) == 1, out
    assert not any("explored" in line and "traces," in line for line in lines[:-1]), out
    assert lines[-1].startswith("conforms: ")


def test_the_progress_bar_runs_on_a_terminal() -> None:
    import io

    from rich.console import Console

    screen = io.StringIO()
    bar = cli._Progress(enabled=True, console=Console(file=screen, force_terminal=True, width=80))
    with bar:
        bar.start("vectors", 3)
        bar.update(2)
        bar.start("random search", None, 10.0)
        bar.left(4.0)
        assert bar.bar.tasks[-1].completed == 6.0 and bar.bar.tasks[-1].description == "random search"
        bar.bar.refresh()
    assert len(bar.bar.tasks) == 1  # one bar at a time: a finished phase's bar is removed
    assert "random search" in screen.getvalue()


def test_verify_takes_a_ports_own_exception_classes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "ports" / "own_errors"))
    kinds = {"Full": "capacity", "NoSuchKey": "missing", "NotPinned": "unreferenced", "Closed": "closed"}
    errors = [arg for name, kind in kinds.items() for arg in ("--error", f"myport:{name}={kind}")]
    argv = ["verify", "myport:Store", "--max-time", "2", "--seed", "1", "--out", str(tmp_path / "d.jsonl")]
    assert cli.main([*argv, *errors]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert cli.main(argv) == 1  # without them, its errors are of no kind
    # Which of its errors heads the report is the shrinker's choice (the shortest trace that shows one).
    shown = capsys.readouterr().out
    assert re.search(r"unexpected myport\.(Full|NoSuchKey|NotPinned|Closed): ", shown), shown
    assert cli.main([*argv, "--error", "myport:Full=full"]) == 2
    assert "'full' is not an error kind" in capsys.readouterr().err


def test_a_failure_to_produce_a_value_is_shown_in_words(tmp_path: Path) -> None:
    body = "    def check_invariants(self):\n        raise AssertionError('slot table out of step')\n"
    divergence = compare(Trace("strict", 4, 2, (Put((("a", b"xy"),)),)), load_target(str(_odd_port(tmp_path, body))))
    assert divergence is not None
    assert "actual:   check_invariants() failed: AssertionError: slot table out of step" in divergence.render()
    shown = divergence.as_json()
    assert shown["actual"]["text"].startswith("check_invariants() failed") and "payload" not in shown
