"""The op alphabet, the trace format, and ``auxspec verify``'s verdicts."""

from __future__ import annotations

import json
import random
import shlex
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auxspec import cli
from auxspec.drivers import verify
from auxspec.engine import traces
from auxspec.engine.codec import (
    BIG,
    MAX_SCALED_OPS,
    MOST_BUFFER,
    MOST_NBYTES,
    MOST_SLOTS,
    SCALED,
    SPECIAL_SIZES,
    decode,
    encode,
)
from auxspec.engine.compare import apply, compare, construct
from auxspec.engine.expect import expected_new, expected_outcomes
from auxspec.engine.fields import Batch, Key, Keys
from auxspec.engine.observable import observed
from auxspec.engine.ops import (
    ALL,
    CORE,
    FORMS,
    OBSERVE,
    REENTRANT_FORMS,
    SHAPES,
    Bad,
    Close,
    Contains,
    Enter,
    Exit,
    Flush,
    Get,
    KeyStr,
    Len,
    Op,
    Put,
    ReadInto,
    SizeInt,
    Trace,
)
from auxspec.engine.ops import Stats as StatsOp
from auxspec.engine.table import kind_of, needs
from auxspec.engine.target import load_target
from auxspec.engine.traces import TraceError, op_from_json, op_to_json
from auxspec.models.sequential import Err, Kind, Ok, Stats


def _invalid_values(op: Op) -> list[object]:
    """Every value of ``op`` that only the strict profile defines."""
    found: list[object] = []
    if isinstance(op, (Put, Get, ReadInto)):
        lists = (op.objects, op.retain, op.release) if isinstance(op, Put) else (op.keys,)
        found += [value for value in lists if isinstance(value, Bad)]
        for value in lists:
            if isinstance(value, Bad):
                continue
            for item in value:
                if isinstance(item, Bad):
                    found.append(item)
                elif isinstance(item, tuple):
                    found += [v for v in item if v is None or isinstance(v, int)]
                elif not isinstance(item, str):
                    found.append(item)
    if isinstance(op, ReadInto) and (op.readonly or isinstance(op.buffer, Bad)):
        found.append(op.buffer)
    if isinstance(op, Contains) and not isinstance(op.key, str):
        found.append(op.key)
    return found


@given(st.binary(max_size=300), st.sampled_from(["strict", "upstream"]))
@settings(max_examples=300)
def test_any_bytes_decode_to_a_trace_the_spec_runs(data: bytes, profile: str) -> None:
    trace = decode(data, profile)
    vector = traces.vector_from_trace(trace, "any")  # the spec never raises on decoded ops
    assert len(vector.expected) == len(trace.ops)
    if isinstance(vector.expected_new, Err):
        assert trace.ops == () and len(data) >= 1 and data[0] >= SPECIAL_SIZES + 8
    elif data and SCALED <= data[0] < SPECIAL_SIZES:  # the scaled scope: sizes across scales
        assert isinstance(trace.object_nbytes, int) and 1 <= trace.object_nbytes <= MOST_NBYTES
        assert isinstance(trace.max_bytes, int) and 1 <= trace.max_bytes // trace.object_nbytes <= MOST_SLOTS
        assert len(trace.ops) <= MAX_SCALED_OPS
    else:
        assert trace.object_nbytes in (1, 2, 3, 4, BIG)
        assert isinstance(trace.max_bytes, int) and 1 <= trace.max_bytes // trace.object_nbytes <= 4
    if profile == "upstream":  # upstream traces never hold undefined inputs
        assert not any(_invalid_values(op) for op in trace.ops)
        assert not any(isinstance(op, (Get, ReadInto)) and op.form == "iter" for op in trace.ops)


def test_decoding_reaches_every_op_form_shape_and_size() -> None:
    seen: set[object] = set()
    rng = random.Random(7)
    for _ in range(2000):
        trace = decode(rng.randbytes(200))
        seen.add(("sizes", expected_new(trace) != Ok(), trace.object_nbytes == BIG))
        for op in trace.ops:
            seen.add(op.name)
            if isinstance(op, (Put, Get, ReadInto)):
                seen.add(op.form)
            seen.update(type(value).__name__ for value in _invalid_values(op))
            seen.update(f"bad {value.what}" for value in _invalid_values(op) if isinstance(value, Bad))
    ops = {"put", "get", "read_into", "close", "flush", "len", "contains", "stats", "enter", "exit"}
    shapes = {f"bad {what}" for what in SHAPES} | {"int", "NoneType"}
    sizes = {("sizes", False, False), ("sizes", False, True), ("sizes", True, False)}
    assert ops | set(FORMS) | shapes | sizes <= seen, sorted(map(str, (ops | set(FORMS) | shapes | sizes) - seen))


def test_features_keep_ops_a_target_lacks_out_of_its_traces() -> None:
    rng = random.Random(8)
    for _ in range(500):
        data = rng.randbytes(120)
        for features in (frozenset(), CORE, ALL):
            for op in decode(data, "strict", features).ops:
                assert needs(op) <= features, (features, op)


def test_vector_round_trips_through_text() -> None:
    trace = Trace(
        "strict",
        4,
        2,
        (
            Put((("a", b"xy"), (1, None)), ("a",), ()),
            Put((("a", b"xy"),), ("a",)),
            Get(("a",)),
            ReadInto(("a",), 1),
            Close(),
        ),
    )
    vector = traces.vector_from_trace(trace, "round trip", "every op")
    assert vector.expected == (Err(Kind.TYPE), Ok(), Ok(b"xy"), Err(Kind.BUFFER), Ok())
    assert traces.loads(traces.dumps(vector)) == vector
    assert json.loads(traces.dumps(vector).splitlines()[0])["version"] == 1  # nothing of format 2 in it
    for op in trace.ops:
        assert op_from_json(op_to_json(op), "here") == op


def test_format_2_round_trips_observations_forms_and_shapes() -> None:
    trace = Trace(
        "strict",
        4,
        2,
        (
            Put((("a", b"xy"), Bad("object")), ("a",), form="tuple"),
            Put((("a", b"xy"),), ("a",), form="iter"),
            Put(Bad("str")),
            Get(Bad("int")),
            Get(("a",), form="iter"),
            ReadInto(("a",), Bad("strided")),
            ReadInto(("a",), 2, form="tuple"),
            Len(),
            Contains("a"),
            Contains(1),
            StatsOp(),
            Flush(),
            Enter(),
            Exit(),
        ),
    )
    vector = traces.vector_from_trace(trace, "format 2", "every new thing")
    assert vector.expected == (
        Err(Kind.TYPE),
        Ok(),
        Err(Kind.TYPE),
        Err(Kind.TYPE),
        Ok(b"xy"),
        Err(Kind.TYPE),
        Ok(b"xy"),
        Ok(1),
        Ok(True),
        Ok(False),
        Ok(Stats(1, 2, 1, 2, 0, 0, 0)),
        Ok(),
        Ok(),
        Ok(),
    )
    text = traces.dumps(vector)
    assert json.loads(text.splitlines()[0])["version"] == 2
    assert traces.loads(text) == vector
    for op in trace.ops:
        assert op_from_json(op_to_json(op), "here") == op


def test_empty_text_as_a_key_list_or_batch_is_refused_and_drawn() -> None:
    """An empty str or bytes given as a batch or key list is a TypeError
    (strict), like a non-empty one; a store that iterates before it checks
    would take it as empty. The codec draws both shapes, and they round-trip."""
    ops = (Put(Bad("empty-str")), Put((), Bad("empty-bytes")), Get(Bad("empty-str")), ReadInto(Bad("empty-bytes"), 4))
    trace = Trace("strict", 4, 2, ops)
    vector = traces.vector_from_trace(trace, "empty text", "refused like any str")
    assert vector.expected == (Err(Kind.TYPE),) * len(ops)
    assert traces.loads(traces.dumps(vector)) == vector
    short = Trace("strict", 4, 2, (Put(Bad("empty-str")), Get(Bad("empty-bytes"))))
    encoded = encode(short)
    assert encoded is not None and decode(encoded) == short
    rng = random.Random(7)
    drawn = set()
    for _ in range(2000):
        for op in decode(bytes([rng.randrange(SPECIAL_SIZES)]) + rng.randbytes(200)).ops:
            drawn |= {value.what for value in vars(op).values() if isinstance(value, Bad)}
    assert {"empty-str", "empty-bytes"} <= drawn


HEADER = '{"format": "auxspec-trace", "version": 1, "profile": "strict", "max_bytes": 4, "object_nbytes": 2}'


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("", 1, "empty file"),
        ("{not json", 1, "not JSON"),
        ('{"format": "other", "version": 1}', 1, "format"),
        (HEADER.replace('"version": 1', '"version": 5'), 1, "version 5 is not supported"),
        (HEADER + '\n{"op": "len", "expect": {"ok": 0}}', 2, "needs format version 2"),
        (HEADER + '\n{"op": "get", "keys": [], "form": "set", "expect": {"ok": ""}}', 2, "form must be one of"),
        (HEADER + '\n{"op": "get", "keys": {"bad": "object"}, "expect": {"ok": ""}}', 2, "a bad value is"),
        (HEADER + '\n{"op": "put", "objects": [{"bad": "str"}], "expect": {"ok": null}}', 2, "a bad value is"),
        (HEADER + '\n{"op": "contains", "key": null, "expect": {"ok": true}}', 2, "key must be a string"),
        (HEADER + '\n{"op": "close", "expect": {"ok": {"stored": 1}}}', 2, "stats are an object"),
        (HEADER + '\n{"op": "close", "expect": {"ok": [1]}}', 2, "ok value is hex"),
        (HEADER.replace("strict", "lenient"), 1, "profile"),
        (HEADER.replace('"max_bytes": 4', '"max_bytes": [4]'), 1, "max_bytes"),
        (HEADER[:-1] + ', "expect_new": {"error": "config"}}\n{"op": "close", "expect": {"ok": null}}', 2, "no ops"),
        (HEADER + '\n{"op": "fly", "expect": {"ok": null}}', 2, "unknown op 'fly'"),
        (HEADER + '\n{"op": "get", "keys": [true], "expect": {"ok": ""}}', 2, "key must be a string"),
        (HEADER + '\n{"op": "get", "keys": "ab", "expect": {"ok": ""}}', 2, "keys must be a list"),
        (HEADER + '\n{"op": "put", "objects": [["a", "zz"]], "expect": {"ok": null}}', 2, "not hex"),
        (HEADER + '\n{"op": "put", "objects": [["a"]], "expect": {"ok": null}}', 2, "each object"),
        (HEADER + '\n{"op": "read_into", "keys": [], "buffer": -1, "expect": {"ok": ""}}', 2, "buffer is a size"),
        (HEADER + '\n{"op": "read_into", "keys": [], "buffer": 1048577, "expect": {"ok": ""}}', 2, "to 1048576"),
        (HEADER + '\n{"op": "close"}', 2, 'needs "expect"'),
        (HEADER + '\n{"op": "close", "expect": {"error": "oops"}}', 2, "unknown error kind"),
        (HEADER + '\n{"op": "close", "expect": {"ok": null}}\n{"op": "get", "ke', 3, "not JSON"),
        (HEADER + "\n[1, 2]", 2, 'needs "op"'),
        # json.loads raises a bare ValueError past int()'s digit limit (found by the trace fuzzer).
        (HEADER.replace('"max_bytes": 4', '"max_bytes": ' + "4" * 5000), 1, "not JSON this reader takes"),
        (HEADER + '\n{"op": "read_into", "keys": [], "buffer": ' + "9" * 4400 + "}", 2, "not JSON this reader"),
    ],
)
def test_malformed_traces_name_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(TraceError, match=rf"^vec\.jsonl:{line}: .*{words}"):
        traces.loads(text, "vec.jsonl")


BUGGY_PORT = textwrap.dedent(
    """
    from auxspec.reference.store import ReferenceStore

    class BlockObjectStore(ReferenceStore):
        # Planted bug: a read does not make its keys most recent.
        def get_concatenated(self, keys):
            before = self._state
            data = super().get_concatenated(keys)
            self._state = type(before)(**{**before.__dict__, "entries": before.entries})
            return data
    """
)


def test_verify_passes_the_reference_and_catches_a_planted_bug(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["verify", "auxspec:ReferenceStore", "--max-time", "2", "--seed", "1"]) == 0
    port = tmp_path / "port.py"
    port.write_text(BUGGY_PORT)
    out = tmp_path / "found.jsonl"
    code = cli.main(
        ["verify", str(port), "--max-time", "60", "--seed", "1", "--out", str(out), "--json", "--large-stores", "off"]
    )
    captured = capsys.readouterr()
    assert code == 1
    report = json.loads(captured.out.strip().splitlines()[-1])
    assert report["result"] == "diverges"
    found = traces.load(out)
    # The written vector replays the divergence and the spec still stands by it.
    assert traces.vector_from_trace(found.trace, "again").expected == found.expected
    assert compare(found.trace, load_target(str(port))) is not None
    assert any(isinstance(op, Get) for op in found.trace.ops)


def test_verify_rejects_bad_targets_and_vectors_with_exit_2(tmp_path: Path) -> None:
    assert cli.main(["verify", "no_such_module_here"]) == 2
    assert cli.main(["verify", "auxspec.reference:NoSuchClass"]) == 2
    assert cli.main(["verify", str(tmp_path / "missing.py")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(HEADER + "\n{broken\n")
    assert cli.main(["verify", "auxspec:ReferenceStore", "--vectors", str(bad)]) == 2
    with pytest.raises(SystemExit) as usage:
        cli.main(["verify", "--profile", "lenient"])
    assert usage.value.code == 2


@given(st.binary(max_size=200), st.sampled_from(["strict", "upstream"]))
@settings(max_examples=400)
def test_the_fast_spec_path_agrees_with_reference_store(data: bytes, profile: str) -> None:
    # expected_outcomes steps the model directly; ReferenceStore goes through
    # the binding and exceptions. Both are the spec and must say the same.
    from auxspec.engine.compare import apply, construct
    from auxspec.engine.expect import expected_outcomes
    from auxspec.reference.store import ReferenceStore

    trace = decode(data, profile)
    store, built = construct(lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n, profile=profile), trace)
    assert built == expected_new(trace)
    slow = []
    for op in trace.ops:
        slow.append((apply(store, op), store.snapshot()))
    assert list(expected_outcomes(trace)) == slow


def test_bundled_vectors_match_the_spec_and_cover_all_of_its_branches(capsys: pytest.CaptureFixture[str]) -> None:
    # What `auxspec vectors --check` prints and enforces (it fails below 100%).
    assert cli.main(["vectors", "--check"]) == 0
    out = capsys.readouterr().out
    assert "model coverage 100.0%" in out and "stale" not in out
    print(out)


# A port that lets a call made from its caller's code through (semantics.md
# section 12): the simple correct port with its one-call-at-a-time guard taken off.
UNGUARDED_PORT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {ports!r})
    from simple_port import make

    BlockObjectStore = make(None)
    for name in ("put", "get_concatenated", "read_into", "close"):
        setattr(BlockObjectStore, name, getattr(BlockObjectStore, name).__wrapped__)
    """
)
PORTS = Path(__file__).resolve().parent / "ports"


def _keys_of(op: Op) -> list[object]:
    """Every key ``op`` carries (its objects', pins', reads' and ``in``'s),
    found by its row's field kinds, so an op added to the table is covered."""
    found: list[object] = []
    for field in kind_of(op).fields:
        value = getattr(op, field.name)
        if isinstance(value, Bad):
            continue
        if isinstance(field.kind, Key):
            found.append(value)
        elif isinstance(field.kind, Keys):
            found += value
        elif isinstance(field.kind, Batch):
            found += [obj[0] for obj in value if not isinstance(obj, Bad)]
    return found


def test_the_scaled_scope_passes_callbacks_into_the_store_and_int_and_str_subclasses() -> None:
    # Only where the spec defines the outcome: strict, a Python caller.
    rng = random.Random(11)
    seen: set[str] = set()
    for _ in range(400):
        data = bytes([rng.randrange(SCALED, SPECIAL_SIZES)]) + rng.randbytes(150)
        for profile, features in (("strict", ALL), ("strict", CORE), ("upstream", ALL)):
            trace = decode(data, profile, features)
            forms = {op.form for op in trace.ops if isinstance(op, (Put, Get, ReadInto))}
            subclass = type(trace.max_bytes) is SizeInt and type(trace.object_nbytes) is SizeInt
            keys = [key for op in trace.ops for key in _keys_of(op)]
            key_types = {type(key) for key in keys}
            if profile != "strict" or features != ALL:
                assert not forms & set(REENTRANT_FORMS) and not subclass, (profile, features)
                assert KeyStr not in key_types, (profile, features)
            else:
                seen |= forms & set(REENTRANT_FORMS)
                seen |= {"SizeInt"} if subclass else set()
                if KeyStr in key_types:
                    # Every valid key of the trace at once; an invalid (int) key stays an int.
                    assert key_types <= {KeyStr, int}, key_types
                    seen.add("KeyStr")
                    # Not a byte more read: with the style byte's KeyStr bit
                    # (bit 3 of its part above style and pattern) cleared, the
                    # same ops (KeyStr equals its value), only the keys' type differs.
                    style = data[5]  # after the selector, capacity, object size, remainder and pool
                    assert style // 18 // 8 % 2 == 1
                    plain = decode(data[:5] + bytes([style - 8 * 18]) + data[6:], profile, features)
                    assert plain == trace
                    assert KeyStr not in {type(key) for op in plain.ops for key in _keys_of(op)}
    assert seen == {*REENTRANT_FORMS, "SizeInt", "KeyStr"}


def _key_str_traces(count: int) -> list[Trace]:
    """``count`` scaled strict traces whose keys are ``KeyStr``, drawn by a fixed seed."""
    rng = random.Random(5)
    found: list[Trace] = []
    while len(found) < count:
        trace = decode(bytes([rng.randrange(SCALED, SPECIAL_SIZES)]) + rng.randbytes(300), "strict", ALL)
        if any(type(key) is KeyStr for op in trace.ops for key in _keys_of(op)):
            found.append(trace)
    return found


def _outcomes(trace: Trace, target_name: str) -> list[object]:
    """Each op's outcome on a new store of ``target_name``, and its observable state after it."""
    target = load_target(target_name)
    store, created = construct(target.factory, trace, target.errors)
    seen: list[object] = [created]
    for op in trace.ops if store is not None else ():
        seen.append(apply(store, op, target.errors))
        assert target.observe is not None
        seen.append(observed(target.observe(store)))
    return seen


def test_str_subclass_keys_replay_as_their_plain_values() -> None:
    # The trace file writes a KeyStr as a plain str: read back, the same trace
    # with plain keys, which each store answers exactly as it answers the KeyStr
    # one, op by op and state by state.
    a, b = KeyStr("a"), KeyStr("b")
    # Every op that carries keys, in each form, an `in` that hits among them (random traces rarely hold one).
    written = Trace(
        "strict",
        SizeInt(4),
        SizeInt(2),
        tuple(
            op
            for form in ("list", "tuple", "iter", "reenter-get")
            for op in (
                Put(((a, b"a1"), (b, b"b1")), (a,), (), form=form),
                Contains(a),
                Get((b, a), form=form),
                ReadInto((a,), 2, form=form),
                Put((), (), (a,), form=form),
                Contains(b),
                Put(((KeyStr("c"), b"c1"),), form=form),
                Contains(b),
            )
        ),
    )
    contained = 0
    for trace in [written, *_key_str_traces(12)]:
        text = traces.dumps(traces.vector_from_trace(trace, "keystr"))
        assert "KeyStr" not in text
        plain = traces.loads(text).trace
        assert plain.ops == trace.ops and all(type(key) is not KeyStr for op in plain.ops for key in _keys_of(op))
        assert json.loads(json.dumps(op_to_json(trace.ops[0]))) == op_to_json(plain.ops[0])
        for target in ("auxstore", "auxspec:ReferenceStore"):
            assert compare(trace, load_target(target)) is None, target
            assert _outcomes(trace, target) == _outcomes(plain, target), target
        contained += sum(1 for value in _outcomes(trace, "auxspec:ReferenceStore") if value == Ok(True))
        for _, snapshot in expected_outcomes(trace):  # the model is given the plain values
            assert all(type(key) is str for key, _ in (*snapshot.entries, *snapshot.references))
    assert contained >= 8  # `in` is checked on a hit, not only a miss


def test_a_port_behind_the_protocol_is_sent_str_subclass_keys_as_plain_json_strings() -> None:
    a, b = KeyStr("a"), KeyStr("b")
    ops: tuple[Op, ...] = (Put(((a, b"a1"), (b, b"b1")), (a,)), Contains(a), Get((b, a)), Put((), (), (a,)))
    ops += (Contains(b), Close(), Contains(a))
    for op in ops:  # each line holds only plain strs, not merely strs that json.dumps writes plainly
        line = op_to_json(op)
        keys = [*line.get("retain", []), *line.get("release", []), *line.get("keys", []), line.get("key", "")]
        keys += [obj[0] for obj in line.get("objects", [])]
        assert keys and all(type(key) is str for key in keys), line
    target, close = verify.exec_target(f"{shlex.quote(sys.executable)} -m auxspec.cli serve")
    try:
        assert OBSERVE in target.features  # `in` goes over the protocol too
        assert compare(Trace("strict", SizeInt(4), SizeInt(2), ops), target) is None
    finally:
        close()


# Two ports that take a str subclass key as something other than its value:
# the simple correct port whose put refuses any key not exactly a str (as a
# port checking `type(key) is str` or `PyUnicode_CheckExact` does), and the
# reference store whose `in` says False for such a key.
KEY_TYPE_PORT_CHECK = "if not isinstance(key, str) or payload is None"
KEY_IN_PORT = textwrap.dedent(
    """
    from auxspec.reference.store import ReferenceStore

    class BlockObjectStore(ReferenceStore):
        def __contains__(self, key):
            if type(key) is not str:
                return False
            return super().__contains__(key)
    """
)


def _key_exact_port(tmp_path: Path) -> Path:
    source = (PORTS / "simple_port.py").read_text()
    assert source.count(KEY_TYPE_PORT_CHECK) == 1
    port = tmp_path / "exact_key_type.py"
    port.write_text(
        source.replace(KEY_TYPE_PORT_CHECK, "if type(key) is not str or payload is None")
        + "\n\nBlockObjectStore = make(None)\n"
    )
    return port


@pytest.mark.parametrize("port", ["put-refuses", "in-false"])
def test_verify_finds_a_port_that_does_not_take_a_str_subclass_key_by_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], port: str
) -> None:
    if port == "put-refuses":
        path = _key_exact_port(tmp_path)
    else:
        path = tmp_path / "in_false.py"
        path.write_text(KEY_IN_PORT)
    asked = (Contains("a"),) if port == "in-false" else ()  # the simple port has no `in`
    plain = Trace("strict", 4, 2, (Put((("a", b"a1"),), ("a",)), *asked, Get(("a",)), Put((), (), ("a",))))
    assert compare(plain, load_target(str(path))) is None  # right for plain keys
    argv = ["verify", str(path), "--max-time", "10", "--seed", "1", "--large-stores", "off"]
    argv += ["--out", str(tmp_path / "found.jsonl")]
    assert cli.main(argv) == 1
    assert "KeyStr(" in capsys.readouterr().out  # the printed trace shows the key's type


@pytest.mark.parametrize("form", REENTRANT_FORMS)
def test_a_call_from_caller_code_is_refused_by_the_stores_and_let_through_is_a_divergence(
    tmp_path: Path, form: str
) -> None:
    op = Put((("a", b"a1"),), ("a",), (), form=form)
    trace = Trace("strict", SizeInt(4), SizeInt(2), (op, Get(("a",), form=form), ReadInto(("a",), 2, form=form)))
    guarded = tmp_path / "guarded.py"  # the simple port as it is, with its guard
    guarded.write_text(UNGUARDED_PORT.format(ports=str(PORTS)).split("for name")[0])
    for target in (None, "auxspec:ReferenceStore", str(guarded)):
        assert compare(trace, load_target(target)) is None, target
    port = tmp_path / "unguarded.py"
    port.write_text(UNGUARDED_PORT.format(ports=str(PORTS)))
    found = compare(trace, load_target(str(port)))
    assert found is not None and "returned instead of being refused" in str(found)
    assert "ReentrantCallError" in str(found) and "semantics.md section 12" in str(found)  # the rule and where it is


def test_verify_finds_a_port_that_lets_calls_from_caller_code_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = tmp_path / "unguarded.py"
    port.write_text(UNGUARDED_PORT.format(ports=str(PORTS)))
    out = tmp_path / "found.jsonl"
    argv = ["verify", str(port), "--max-time", "60", "--seed", "1", "--out", str(out), "--large-stores", "off"]
    assert cli.main(argv) == 1
    assert "returned instead of being refused" in capsys.readouterr().out
    found = traces.load(out)
    assert any(getattr(op, "form", "") in REENTRANT_FORMS for op in found.trace.ops)
    assert compare(found.trace, load_target(str(port))) is not None  # the vector replays the divergence


# A Python port that raises an exception no error kind stands for, in
# mid-trace, once it holds two keys (issue 12 point 5): a counterexample.
RAISING_PORT = textwrap.dedent(
    """
    from auxspec.reference.store import ReferenceStore

    class BlockObjectStore(ReferenceStore):
        def get_concatenated(self, keys):
            if len(self.state.entries) >= 2:
                raise ZeroDivisionError("planted")
            return super().get_concatenated(keys)
    """
)


def test_a_python_port_raising_an_exception_the_spec_does_not_allow_is_a_shrunk_counterexample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = tmp_path / "raising.py"
    port.write_text(RAISING_PORT)
    out = tmp_path / "found.jsonl"
    argv = ["verify", str(port), "--max-time", "60", "--seed", "3", "--out", str(out), "--large-stores", "off"]
    code = cli.main(argv)
    shown = capsys.readouterr().out
    assert code == 1, shown
    assert "unexpected ZeroDivisionError: planted" in shown
    found = traces.load(out)  # shrunk: two puts (or one of two keys) and the read
    assert 2 <= len(found.trace.ops) <= 3, shown
    assert isinstance(found.trace.ops[-1], Get)
    assert compare(found.trace, load_target(str(port))) is not None


def test_an_unrefused_call_from_caller_code_is_named_as_the_deviation_and_nothing_else_is(tmp_path: Path) -> None:
    port = tmp_path / "unguarded.py"
    port.write_text(UNGUARDED_PORT.format(ports=str(PORTS)))
    trace = Trace("strict", 4, 2, (Put((("a", b"a1"),), ("a",), (), form="reenter-close"),))
    found = compare(trace, load_target(str(port)))
    assert found is not None and found.deviation == "reentrant-call-accepted"
    # A near miss: the same op on a port that refuses the inner call but then
    # fails the outer call with an exception of no kind is a plain divergence.
    crashing = tmp_path / "crashing.py"
    crashing.write_text(
        textwrap.dedent(
            """
            from auxspec.reference.store import ReferenceStore

            class BlockObjectStore(ReferenceStore):
                def put(self, objects, *, retain_keys=(), release_keys=()):
                    super().put(objects, retain_keys=retain_keys, release_keys=release_keys)
                    raise ZeroDivisionError("planted")
            """
        )
    )
    found = compare(trace, load_target(str(crashing)))
    assert found is not None and found.deviation is None


def test_decoded_buffers_fit_the_trace_format_and_the_protocol() -> None:
    # A read of many big objects must still be a valid trace line and request.
    assert MOST_BUFFER <= traces.MAX_BUFFER and MOST_BUFFER % 8 == 0
    rng = random.Random(12)
    for _ in range(1500):
        trace = decode(bytes([rng.randrange(SCALED, SPECIAL_SIZES)]) + rng.randbytes(300))
        for op in trace.ops:
            if isinstance(op, ReadInto) and isinstance(op.buffer, int):
                assert 0 <= op.buffer <= traces.MAX_BUFFER


def test_compact_payloads_round_trip_and_stay_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long payload is written as a head and a repeated block (format 3),
    a get's value as the payloads it joins; a reader refuses a short line
    that would make more than its expansion limit, and a protocol line
    (no expander) refuses parts altogether."""
    block = bytes(range(7, 250)) * 3
    first, second = b"<a>" + (block * 100)[:69_997], bytes(70_000)
    trace = Trace("strict", 140_000, 70_000, (Put((("a", first), ("b", second)), (), ()), Get(("a", "b"))))
    vector = traces.vector_from_trace(trace, "compact")
    text = traces.dumps(vector)
    assert json.loads(text.split("\n")[0])["version"] == traces.COMPACT_VERSION
    assert len(text) < 8_000  # 140,000 bytes of payloads and 140,000 of the get's value, in parts
    assert '{"repeat": "00", "bytes": 70000}' in text
    again = traces.loads(text)
    assert again.trace == trace and again.expected == vector.expected
    short = traces.vector_from_trace(replace(trace, ops=(Put((("a", b"\1" * 100),), (), ()),)), "short")
    assert json.loads(traces.dumps(short).split("\n")[0])["version"] == 1  # nothing long: written as before
    bomb = text.replace('"bytes": 70000', '"bytes": 4000000000000')
    with pytest.raises(TraceError, match="AUXSPEC_MAX_EXPANDED_BYTES"):
        traces.loads(bomb)
    monkeypatch.setenv(traces.EXPANDED_VARIABLE, "200000")
    with pytest.raises(TraceError, match="more than 200000 bytes"):
        traces.loads(text)  # 140,000 bytes of puts and 140,000 of the get's expectation
    line = json.loads(text.split("\n")[1])
    with pytest.raises(TraceError, match="payload must be hex"):
        traces.op_from_json(line, "request")  # the --exec protocol: hex only
