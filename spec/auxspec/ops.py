"""The one op alphabet: every driver (Hypothesis, atheris, vector files, the
process protocol, the background writer's driver) speaks it, and ``decode``
is the one decoder from bytes.

A trace is a store's parameters plus a list of ops. Values inside ops are the
Python values a caller would pass, invalid ones included: a key is a ``str``
(or an ``int``, which is invalid), a payload is ``bytes`` (or ``None``,
invalid), a read buffer is a size and whether it is read-only. ``Bad`` stands
where a whole key list, batch, object or buffer has the wrong shape (a
``str`` given as a key list, an object without ``key`` and ``payload``, a
buffer that is not one).

An op's ``form`` says how a Python driver passes the valid values. It never
changes the outcome, so ports in other languages ignore it:

- ``list``: lists, ``BlockObject`` with ``bytes``, a ``bytearray`` buffer.
- ``tuple``: tuples, ``BlockObject`` with a ``bytearray`` payload that the
  caller overwrites once the call returns, a ``memoryview`` buffer.
- ``iter``: one-pass generators, plain objects (not ``BlockObject``) whose
  payload the caller replaces once the call returns, a buffer cast to
  format ``c``.

What a target offers decides which ops a trace may hold (``Features``):
``read_into``; the observations ``flush``, ``len``, ``in``, ``stats`` and
``with`` (``OBSERVE``); the Python call forms and shapes (``PYTHON``; a port
behind the process protocol receives plain JSON values).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from functools import partial
from operator import length_hint
from typing import Any, Protocol

from auxspec import binding, model
from auxspec.model import Err, Invalid, Kind, Ok, Outcome, violations
from auxstore import BlockObject, StoreSnapshot


@dataclass(frozen=True)
class Bad:
    """A value of the wrong shape (strict only): ``what`` is one of ``SHAPES``."""

    what: str


# Bad shapes and where each may stand.
BAD_LISTS = ("str", "int")  # a key list or batch given as the str "k0", or as the int 7
BAD_OBJECT = "object"  # an object with neither key nor payload, inside a batch
BAD_BUFFERS = ("not-buffer", "strided")  # None, or a writable buffer that is not C-contiguous
SHAPES = (*BAD_LISTS, BAD_OBJECT, *BAD_BUFFERS)

KeyValue = str | int
PayloadValue = bytes | None
KeyList = tuple[KeyValue, ...] | Bad
ObjectValue = tuple[KeyValue, PayloadValue] | Bad

FORMS = ("list", "tuple", "iter")


@dataclass(frozen=True)
class Put:
    objects: tuple[ObjectValue, ...] | Bad = ()
    retain: KeyList = ()
    release: KeyList = ()
    form: str = "list"
    name = "put"


@dataclass(frozen=True)
class Get:
    keys: KeyList = ()
    form: str = "list"
    name = "get"


@dataclass(frozen=True)
class ReadInto:
    keys: KeyList = ()
    buffer: int | Bad = 0
    readonly: bool = False
    form: str = "list"
    name = "read_into"


@dataclass(frozen=True)
class Close:
    name = "close"


@dataclass(frozen=True)
class Flush:
    name = "flush"


@dataclass(frozen=True)
class Len:
    name = "len"


@dataclass(frozen=True)
class Contains:
    key: KeyValue = ""
    name = "contains"


@dataclass(frozen=True)
class Stats:
    name = "stats"


@dataclass(frozen=True)
class Enter:
    """``store.__enter__()``: the same step as ``flush``; it returns the store."""

    name = "enter"


@dataclass(frozen=True)
class Exit:
    """``store.__exit__(None, None, None)``: the same step as ``close``."""

    name = "exit"


Op = Put | Get | ReadInto | Close | Flush | Len | Contains | Stats | Enter | Exit
OBSERVATIONS: tuple[type, ...] = (Flush, Len, Contains, Stats, Enter, Exit)

SizeValue = int | float | str | None  # what a trace may pass as a size; only an int (not a bool) is valid


@dataclass(frozen=True)
class Trace:
    profile: str
    max_bytes: SizeValue
    object_nbytes: SizeValue
    ops: tuple[Op, ...] = field(default=())


class Store(Protocol):
    """What a target store must offer to be driven by a trace."""

    def put(self, objects: list[Any], *, retain_keys: Any = (), release_keys: Any = ()) -> None: ...
    def get_concatenated(self, keys: list[Any]) -> bytes: ...
    def close(self) -> None: ...


StoreFactory = Callable[[Any, Any], Store]

# ----------------------------------------------------------------- features

READ_INTO = "read_into"  # read_into(keys, buffer)
OBSERVE = "observe"  # flush(), len(store), key in store, stats(), with store
PYTHON = "python"  # the forms and Bad shapes: only a Python store can be handed them
# Not a target's: invalid values under ``upstream`` too, where the model
# raises UndefinedInput (the model harness checks that it does).
UNDEFINED = "undefined"
Features = frozenset[str]
ALL: Features = frozenset({READ_INTO, OBSERVE, PYTHON})
CORE: Features = frozenset({READ_INTO})  # a port behind the process protocol


def needs(op: Op) -> Features:
    """The features a target must have to run ``op``."""
    wanted: set[str] = set()
    if isinstance(op, ReadInto):
        wanted.add(READ_INTO)
    if isinstance(op, OBSERVATIONS):
        wanted.add(OBSERVE)
    if isinstance(op, (Put, Get, ReadInto)) and (op.form != "list" or _has_bad(op)):
        wanted.add(PYTHON)
    return frozenset(wanted)


def _has_bad(op: Put | Get | ReadInto) -> bool:
    if isinstance(op, Put):
        return any(isinstance(v, Bad) for v in (op.objects, op.retain, op.release)) or (
            not isinstance(op.objects, Bad) and any(isinstance(obj, Bad) for obj in op.objects)
        )
    if isinstance(op, ReadInto) and isinstance(op.buffer, Bad):
        return True
    return isinstance(op.keys, Bad)


def trace_needs(trace: Trace) -> Features:
    return frozenset().union(*(needs(op) for op in trace.ops))


# ----------------------------------------------------------------- decoding


class _Bytes:
    """Reads bytes from the input; past its end every read is 0, so any input
    decodes and a shorter input is a shorter trace."""

    __slots__ = ("_rest", "next")

    def __init__(self, data: bytes) -> None:
        rest = iter(data)
        self._rest = rest
        # The builtin next() with a default: the fuzzers call this per byte.
        self.next: Callable[[], int] = partial(next, rest, 0)

    def more(self) -> bool:
        return length_hint(self._rest) > 0


KEY_POOL = 6  # few keys, so they repeat: reuse is where the bugs are
# The key each byte stands for, made once rather than per key decoded; under
# strict (invalid values allowed) 255 is the non-str key 1.
_KEYS = tuple(f"k{byte % KEY_POOL}" for byte in range(256))
_KEYS_OR_INVALID: tuple[KeyValue, ...] = (*_KEYS[:255], 1)
MAX_OPS = 64
BIG = 4096  # an object size at which auxstore copies objects one by one
# Sizes byte values from SPECIAL_SIZES on: big objects, then stores that
# cannot be built (out of range under both profiles, not ints under strict).
SPECIAL_SIZES = 240
BAD_SIZES: tuple[tuple[SizeValue, SizeValue], ...] = ((8, 0), (1, 2), (-1, 1), (0, 0))
NON_INT_SIZES: tuple[tuple[SizeValue, SizeValue], ...] = ((8, 2.5), ("8", 2), (None, 1), (True, 1))


def decode(data: bytes, profile: str = "strict", features: Features = ALL) -> Trace:
    """The trace that ``data`` stands for, using only ops ``features`` allow.

    Biased so that short inputs reach the interesting states: capacities of 1-4
    (capacity 1 is the likeliest), keys from a pool of six, frequent retains so
    stores fill with pinned keys, and under ``strict`` occasional invalid
    values. Now and then objects are big (``BIG`` bytes) or the store cannot
    be built.
    """
    src = _Bytes(data)
    invalid = profile == "strict" or UNDEFINED in features
    python = PYTHON in features
    selector = src.next()
    if selector >= SPECIAL_SIZES + 8:
        sizes = (BAD_SIZES + NON_INT_SIZES)[selector % 8] if invalid else BAD_SIZES[selector % 4]
        return Trace(profile, sizes[0], sizes[1])
    object_nbytes = BIG if selector >= SPECIAL_SIZES else 1 + selector % 4
    capacity = 1 + (src.next() % 8) // 2 if src.more() else 1
    max_bytes = capacity * object_nbytes + src.next() % min(object_nbytes, 4)  # a remainder is allowed
    ops: list[Op] = []
    while src.more() and len(ops) < MAX_OPS:
        byte = src.next()
        kind = _KINDS[byte % 32]
        if (kind == "read_into" and READ_INTO not in features) or (kind == "observe" and OBSERVE not in features):
            kind = "get"
        # The top three bits choose the form: mostly plain lists.
        form = FORMS[max(byte >> 5, 5) - 5] if python else "list"
        if form == "iter" and kind != "put" and profile != "strict":
            form = "tuple"  # vLLM reads a key list twice: a one-pass iterator is not the list[str] it takes
        if kind == "put":
            ops.append(_decode_put(src, object_nbytes, invalid, python, form))
        elif kind == "get":
            ops.append(Get(_decode_keys(src, invalid, python, 4), form))
        elif kind == "read_into":
            keys = _decode_keys(src, invalid, python, 3)
            count = 1 if isinstance(keys, Bad) else len(keys)
            size = count * object_nbytes - (src.next() % 4 == 0)
            shape = src.next() % 16
            buffer: int | Bad = max(size, 0)
            if invalid and python and shape in (1, 2):
                buffer = Bad(BAD_BUFFERS[shape - 1])
            ops.append(ReadInto(keys, buffer, readonly=invalid and shape == 0, form=form))
        elif kind == "observe":
            ops.append(_decode_observation(src, invalid))
        else:
            ops.append(Close())
    return Trace(profile, max_bytes, object_nbytes, tuple(ops))


# What the low five bits of an op byte choose.
_KINDS = ("put",) * 17 + ("get",) * 7 + ("read_into",) * 5 + ("observe",) * 2 + ("close",)


def _decode_observation(src: _Bytes, invalid: bool) -> Op:
    which = src.next() % 6
    if which == 2:
        return Contains(_decode_key(src, invalid))
    return (Flush(), Len(), None, Stats(), Enter(), Exit())[which]  # type: ignore[return-value]


def _decode_key(src: _Bytes, invalid: bool) -> KeyValue:
    return (_KEYS_OR_INVALID if invalid else _KEYS)[src.next()]


def _decode_keys(src: _Bytes, invalid: bool, python: bool, most: int) -> KeyList:
    byte = src.next()
    if byte >= 250 and invalid and python:  # a count byte of 250 and up: a list of the wrong shape
        return Bad(BAD_LISTS[byte % 2])
    names, read = (_KEYS_OR_INVALID if invalid else _KEYS), src.next
    return tuple([names[read()] for _ in range(byte % (most + 1))])


def _decode_put(src: _Bytes, object_nbytes: int, invalid: bool, python: bool, form: str) -> Put:
    byte = src.next()
    objects: tuple[ObjectValue, ...] | Bad
    if byte >= 250 and invalid and python:
        objects = Bad(BAD_LISTS[byte % 2])
    else:
        found: list[ObjectValue] = []
        names, read = (_KEYS_OR_INVALID if invalid else _KEYS), src.next
        for _ in range(byte % 4):
            key_byte = read()
            if key_byte == 254 and invalid and python:
                found.append(Bad(BAD_OBJECT))
                continue
            fill = read()
            data = bytes([fill]) * object_nbytes
            payload: PayloadValue = data
            if fill >= 253 and invalid:
                payload = None if fill == 253 else data + data[:1]  # wrong type, wrong length
            found.append((names[key_byte], payload))
        objects = tuple(found)
    return Put(objects, _decode_keys(src, invalid, python, 2), _decode_keys(src, invalid, python, 2), form)


# ---------------------------------------------------------------- the spec


def construct(factory: Callable[[Any, Any], Any], trace: Trace) -> tuple[Any, Outcome]:
    """Build the store ``trace`` starts from: the store (or None) and the outcome."""
    try:
        return factory(trace.max_bytes, trace.object_nbytes), Ok()
    except Exception as error:
        kind = binding.classify("new", error)
        if kind is None:
            raise
        return None, Err(kind)


def _initial_state(trace: Trace) -> model.State | Err:
    return model.new(binding.as_size(trace.max_bytes), binding.as_size(trace.object_nbytes), trace.profile)


def expected_new(trace: Trace) -> Outcome:
    """The spec's outcome for building the store ``trace`` starts from."""
    built = _initial_state(trace)
    return built if isinstance(built, Err) else Ok()


def expected_outcomes(trace: Trace) -> Iterator[tuple[Outcome, StoreSnapshot]]:
    """The spec's outcome and snapshot for each op of ``trace``, in order
    (nothing when the store cannot be built).

    The model's steps run on the state directly: the same semantics as
    driving a ``ReferenceStore`` (tests/test_traces_and_verify.py checks the
    two agree) without raising and classifying an exception per failure,
    which is most of a fuzzer's time.
    """
    built = _initial_state(trace)
    if isinstance(built, Err):
        return
    state = built
    for op in trace.ops:
        state, outcome = spec_step(state, op)
        broken = violations(state)
        if broken:  # the model itself is wrong: no target can be judged by it
            raise AssertionError(f"model invariant broken after {op}: {'; '.join(broken)}")
        yield outcome, StoreSnapshot(state.entries, state.refs, state.closed)


_BAD_KEY = (Invalid("key list of the wrong shape"),)  # as binding.as_keys reads a str or an int
_BAD_ITEM = (Invalid("object without key and payload"), Invalid("no payload"))


def _key(value: KeyValue) -> model.KeyArg:
    return value if isinstance(value, str) else Invalid("key that is not a str")


def _keys(values: KeyList) -> tuple[model.KeyArg, ...]:
    return _BAD_KEY if isinstance(values, Bad) else tuple(map(_key, values))


def _item(value: ObjectValue) -> model.Item:
    if isinstance(value, Bad):
        return _BAD_ITEM
    key, payload = value
    return _key(key), payload if isinstance(payload, bytes) else Invalid("payload")


def put_args(op: Put) -> tuple[tuple[model.Item, ...], tuple[model.KeyArg, ...], tuple[model.KeyArg, ...]]:
    """The model's view of a put: its items, retain keys and release keys."""
    items = (_BAD_ITEM,) if isinstance(op.objects, Bad) else tuple(map(_item, op.objects))
    return items, _keys(op.retain), _keys(op.release)


def read_args(op: Get | ReadInto) -> tuple[tuple[model.KeyArg, ...], int | Invalid | None]:
    """The model's view of a read: its keys and (``read_into`` only) the buffer size."""
    if isinstance(op, Get):
        return _keys(op.keys), None
    buffer: int | Invalid = op.buffer if isinstance(op.buffer, int) else Invalid(f"buffer: {op.buffer.what}")
    return _keys(op.keys), Invalid("read-only buffer") if op.readonly else buffer


def spec_step(state: model.State, op: Op, steps: Any = model) -> tuple[model.State, Outcome]:
    """One op on a model state, with the binding's rules for op values (a
    non-str key, a None payload, a read-only buffer and every ``Bad`` shape
    are invalid). ``steps`` is the model module, or a stand-in with the same
    functions (the model harness checks their contracts on each call)."""
    result: tuple[model.State, Outcome]
    if isinstance(op, Put):
        result = steps.put(state, *put_args(op))
    elif isinstance(op, Get):
        result = steps.get_concatenated(state, read_args(op)[0])
    elif isinstance(op, ReadInto):
        result = steps.read_into(state, *read_args(op))
    elif isinstance(op, (Flush, Enter)):
        result = steps.flush(state)
    elif isinstance(op, Len):
        result = steps.length(state)
    elif isinstance(op, Contains):
        result = steps.contains(state, _key(op.key))
    elif isinstance(op, Stats):
        result = steps.stats(state)
    else:
        result = steps.close(state)
    return result


# ---------------------------------------------------------------- execution


class _Loose:
    """A batch object that is not a ``BlockObject``: plain, mutable attributes."""

    __slots__ = ("key", "payload")

    def __init__(self, key: Any, payload: Any) -> None:
        self.key, self.payload = key, payload

    def __repr__(self) -> str:
        return f"_Loose({self.key!r}, {self.payload!r})"


class _Shapeless:
    """An object with neither ``key`` nor ``payload``."""

    def __repr__(self) -> str:
        return "<object without key and payload>"


_BAD_VALUES: dict[str, Callable[[], Any]] = {"str": lambda: "k0", "int": lambda: 7}


def _pass(values: tuple[Any, ...] | Bad, form: str) -> Any:
    """A key list or batch as the caller of ``form`` passes it."""
    if isinstance(values, Bad):
        return _BAD_VALUES[values.what]()
    if form == "tuple":
        return values
    if form == "iter":
        return (value for value in values)
    return list(values)


@dataclass
class Call:
    """An op's Python arguments, made fresh for one call, and what the caller
    does to its own values once the call has returned."""

    objects: Any = None
    retain: Any = None
    release: Any = None
    keys: Any = None
    buffer: Any = None
    target: bytearray | bytes | None = None  # the memory behind ``buffer``
    after: Callable[[], None] | None = None


def arguments(op: Put | Get | ReadInto) -> Call:
    """The Python values ``op`` stands for, in its form."""
    if isinstance(op, Put):
        made = [] if isinstance(op.objects, Bad) else [_object(obj, op.form) for obj in op.objects]
        objects = _pass(op.objects if isinstance(op.objects, Bad) else tuple(made), op.form)
        return Call(objects, _pass(op.retain, op.form), _pass(op.release, op.form), after=_scribble(made, op.form))
    if isinstance(op, Get):
        return Call(keys=_pass(op.keys, op.form))
    memory, buffer = _buffer(op)
    return Call(keys=_pass(op.keys, op.form), buffer=buffer, target=memory)


def _object(value: ObjectValue, form: str) -> Any:
    if isinstance(value, Bad):
        return _Shapeless()
    key, payload = value
    if payload is None or form == "list":
        return BlockObject(key, payload)  # type: ignore[arg-type]
    if form == "tuple":
        return BlockObject(key, bytearray(payload))  # type: ignore[arg-type]
    return _Loose(key, payload)


def _scribble(objects: list[Any], form: str) -> Callable[[], None] | None:
    """After the call, change what the caller passed: a store that kept a
    reference instead of a copy now holds the wrong bytes."""
    if form == "list":
        return None

    def after() -> None:
        for obj in objects:
            payload = getattr(obj, "payload", None)
            if isinstance(payload, bytearray):
                payload[:] = b"\xee" * len(payload)
            elif isinstance(obj, _Loose):
                obj.payload = b"\xee" * len(obj.payload)

    return after


def _buffer(op: ReadInto) -> tuple[bytearray | bytes | None, Any]:
    if isinstance(op.buffer, Bad):
        if op.buffer.what == "strided":
            every_other = bytearray(2 * 8 + 1)
            return every_other, memoryview(every_other)[::2]
        return None, None
    memory: bytearray | bytes = bytes(op.buffer) if op.readonly else bytearray(op.buffer)
    if op.form == "list":
        return memory, memory
    view = memoryview(memory)
    return memory, view if op.form == "tuple" else view.cast("c")


def apply(store: Any, op: Op) -> Outcome:
    """Run ``op`` on ``store``; the outcome is the value or the error kind.

    An exception that no kind stands for propagates, and so does an
    ``AssertionError`` for an error without a message: both are divergences
    the caller reports with their traceback.
    """
    try:
        return Ok(invoke(store, op))
    except Exception as error:
        kind = binding.classify(op.name, error)
        if kind is None:
            raise
        if not str(error):
            raise AssertionError(f"{op.name} raised {type(error).__name__} with no message") from error
        return Err(kind)


def invoke(store: Any, op: Op) -> model.Value:
    """Make the call ``op`` stands for on ``store`` and return what the model
    calls its value (``read_into``: the bytes written); exceptions propagate."""
    if isinstance(op, Put):
        if op.form == "list" and not _has_bad(op):  # the common case, kept cheap for the fuzzers
            objects = [BlockObject(key, payload) for key, payload in op.objects]  # type: ignore[arg-type, misc, union-attr]
            store.put(objects, retain_keys=list(op.retain), release_keys=list(op.release))  # type: ignore[arg-type]
            return None
        call = arguments(op)
        store.put(call.objects, retain_keys=call.retain, release_keys=call.release)
        if call.after is not None:
            call.after()
        return None
    if isinstance(op, Get):
        keys = list(op.keys) if op.form == "list" and not isinstance(op.keys, Bad) else arguments(op).keys
        return bytes(store.get_concatenated(keys))
    if isinstance(op, ReadInto):
        call = arguments(op)
        written = store.read_into(call.keys, call.buffer)
        if call.target is None or isinstance(op.buffer, Bad):
            return None  # a bad buffer must have been refused: any return is a divergence
        return bytes(call.target[:written])
    if isinstance(op, Close):
        store.close()
        return None
    if isinstance(op, Flush):
        store.flush()
        return None
    if isinstance(op, Len):
        return len(store)
    if isinstance(op, Contains):
        return op.key in store
    if isinstance(op, Stats):
        got = store.stats()
        return model.Stats(*(getattr(got, name) for name in STATS_FIELDS))
    if isinstance(op, Enter):
        entered = store.__enter__()
        if entered is not store:
            raise AssertionError(f"__enter__ returned {entered!r}, not the store itself")
        return None
    store.__exit__(None, None, None)
    return None


STATS_FIELDS = tuple(f.name for f in fields(model.Stats))


def describe(op: Op) -> str:
    """``op`` as the call it stands for, for people."""
    form = f" as {op.form}" if isinstance(op, (Put, Get, ReadInto)) and op.form != "list" else ""
    if isinstance(op, Put):
        if isinstance(op.objects, Bad):
            objects = _shown(op.objects)
        else:
            shown = (
                "<object without key and payload>" if isinstance(obj, Bad) else f"{obj[0]!r}={_payload(obj[1])}"
                for obj in op.objects
            )
            objects = f"[{', '.join(shown)}]"
        pins = "".join(
            f", {name}={_shown(keys)}" for name, keys in (("retain", op.retain), ("release", op.release)) if keys
        )
        return f"put({objects}{pins}){form}"
    if isinstance(op, Get):
        return f"get_concatenated({_shown(op.keys)}){form}"
    if isinstance(op, ReadInto):
        if isinstance(op.buffer, Bad):
            buffer = "None" if op.buffer.what == "not-buffer" else "a buffer that is not C-contiguous"
        else:
            buffer = f"{'read-only ' if op.readonly else ''}buffer of {op.buffer} bytes"
        return f"read_into({_shown(op.keys)}, {buffer}){form}"
    if isinstance(op, Contains):
        return f"{op.key!r} in store"
    return _PLAIN[op.name]


_PLAIN = {
    "close": "close()",
    "flush": "flush()",
    "len": "len(store)",
    "stats": "stats()",
    "enter": "store.__enter__()",
    "exit": "store.__exit__(None, None, None)",
}


def _shown(values: Any) -> str:
    if isinstance(values, Bad):
        return {"str": "'k0' (a str, not a list)", "int": "7 (not iterable)"}[values.what]
    return repr(list(values))


def _payload(payload: bytes | None) -> str:
    if payload is None:
        return "None"
    if len(payload) > 8 and payload == payload[:1] * len(payload):
        return f"{payload[:1].hex()}*{len(payload)}"  # a big object: its fill byte and size
    return payload.hex()


# ------------------------------------------------------------ trace format


FORMAT = "auxspec-trace"
VERSION = 2  # 2 added the observations, forms and Bad shapes; a file that needs none of them is written as 1
VERSIONS = (1, 2)


def op_version(op: Op) -> int:
    """The lowest format version that can hold ``op``."""
    return 2 if needs(op) - CORE else 1


def version_of(trace: Trace) -> int:
    """The lowest format version that can hold ``trace``."""
    return max(map(op_version, trace.ops), default=1)


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    if isinstance(outcome, Err):
        return {"error": outcome.kind.value}
    value = outcome.value
    if isinstance(value, bytes):
        return {"ok": value.hex()}
    if isinstance(value, model.Stats):
        return {"ok": {name: getattr(value, name) for name in STATS_FIELDS}}
    return {"ok": value}


def _bad_to_json(value: Any) -> Any:
    return {"bad": value.what} if isinstance(value, Bad) else value


def _keys_to_json(keys: KeyList) -> Any:
    return _bad_to_json(keys) if isinstance(keys, Bad) else list(keys)


def op_to_json(op: Op) -> dict[str, Any]:
    body: dict[str, Any]
    if isinstance(op, Put):
        objects: Any = _bad_to_json(op.objects)
        if not isinstance(op.objects, Bad):
            objects = [
                _bad_to_json(obj) if isinstance(obj, Bad) else [obj[0], None if obj[1] is None else obj[1].hex()]
                for obj in op.objects
            ]
        body = {"op": "put", "objects": objects}
        body.update(retain=_keys_to_json(op.retain), release=_keys_to_json(op.release))
    elif isinstance(op, Get):
        body = {"op": "get", "keys": _keys_to_json(op.keys)}
    elif isinstance(op, ReadInto):
        body = {"op": "read_into", "keys": _keys_to_json(op.keys), "buffer": _bad_to_json(op.buffer)}
        body["readonly"] = op.readonly
    elif isinstance(op, Contains):
        body = {"op": "contains", "key": op.key}
    else:
        body = {"op": op.name}
    if isinstance(op, (Put, Get, ReadInto)) and op.form != "list":
        body["form"] = op.form
    return body


# The largest read_into buffer a trace or a protocol request may ask for: far
# more than any trace reads (64 keys of 16 KiB), and a reader (auxspec serve)
# allocates it, so a line cannot make it allocate gigabytes.
MAX_BUFFER = 1 << 20


class TraceError(ValueError):
    """A trace or vector file that does not follow the format; names the line."""


def _want(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise TraceError(f"{where}: {what}")


def _bad_from_json(value: Any, where: str, allowed: tuple[str, ...]) -> Bad | None:
    """``{"bad": what}`` as a ``Bad``; None for any other value."""
    if not isinstance(value, dict):
        return None
    _want(set(value) == {"bad"} and value["bad"] in allowed, where, f'a bad value is {{"bad": one of {list(allowed)}}}')
    return Bad(value["bad"])


def _key_from_json(value: Any, where: str) -> KeyValue:
    _want(isinstance(value, (str, int)) and not isinstance(value, bool), where, f"key must be a string, got {value!r}")
    return value  # type: ignore[no-any-return]


def _keys_from_json(value: Any, where: str) -> KeyList:
    bad = _bad_from_json(value, where, BAD_LISTS)
    if bad is not None:
        return bad
    _want(isinstance(value, list), where, "keys must be a list")
    return tuple(_key_from_json(k, where) for k in value)


def _object_from_json(obj: Any, where: str) -> ObjectValue:
    bad = _bad_from_json(obj, where, (BAD_OBJECT,))
    if bad is not None:
        return bad
    _want(isinstance(obj, list) and len(obj) == 2, where, "each object is [key, hex payload or null]")
    payload = obj[1]
    _want(payload is None or isinstance(payload, str), where, "payload must be hex or null")
    try:
        data = None if payload is None else bytes.fromhex(payload)
    except ValueError:
        raise TraceError(f"{where}: payload {payload!r} is not hex") from None
    return _key_from_json(obj[0], where), data


def _form_from_json(line: dict[str, Any], where: str) -> str:
    form = line.get("form", "list")
    _want(form in FORMS, where, f"form must be one of {', '.join(FORMS)}")
    return str(form)


def op_from_json(line: Any, where: str) -> Op:
    _want(isinstance(line, dict) and isinstance(line.get("op"), str), where, 'an op line needs "op"')
    name = line["op"]
    if name == "put":
        raw = line.get("objects", [])
        objects: tuple[ObjectValue, ...] | Bad | None = _bad_from_json(raw, where, BAD_LISTS)
        if objects is None:
            _want(isinstance(raw, list), where, "objects must be a list")
            objects = tuple(_object_from_json(obj, where) for obj in raw)
        return Put(
            objects,
            _keys_from_json(line.get("retain", []), where),
            _keys_from_json(line.get("release", []), where),
            _form_from_json(line, where),
        )
    if name == "get":
        return Get(_keys_from_json(line.get("keys"), where), _form_from_json(line, where))
    if name == "read_into":
        buffer = line.get("buffer")
        bad = _bad_from_json(buffer, where, BAD_BUFFERS)
        _want(
            bad is not None or (isinstance(buffer, int) and not isinstance(buffer, bool) and 0 <= buffer <= MAX_BUFFER),
            where,
            f"buffer is a size from 0 to {MAX_BUFFER}",
        )
        readonly = line.get("readonly", False)
        _want(isinstance(readonly, bool), where, "readonly must be true or false")
        keys = _keys_from_json(line.get("keys"), where)
        return ReadInto(keys, bad or buffer, readonly, _form_from_json(line, where))
    if name == "contains":
        return Contains(_key_from_json(line.get("key"), where))
    simple: dict[str, Op] = {
        "close": Close(),
        "flush": Flush(),
        "len": Len(),
        "stats": Stats(),
        "enter": Enter(),
        "exit": Exit(),
    }
    if name in simple:
        return simple[name]
    raise TraceError(f"{where}: unknown op {name!r}")


def outcome_from_json(value: Any, where: str) -> Outcome:
    _want(isinstance(value, dict) and len(value) == 1, where, 'expect is {"ok": ...} or {"error": kind}')
    if "error" in value:
        try:
            return Err(Kind(value["error"]))
        except ValueError:
            raise TraceError(f"{where}: unknown error kind {value['error']!r}") from None
    _want("ok" in value, where, 'expect is {"ok": ...} or {"error": kind}')
    ok = value["ok"]
    if ok is None or isinstance(ok, (bool, int)):
        return Ok(ok)
    if isinstance(ok, dict):
        _want(
            set(ok) == set(STATS_FIELDS) and all(type(ok[name]) is int for name in STATS_FIELDS),
            where,
            f"stats are an object of the ints {', '.join(STATS_FIELDS)}",
        )
        return Ok(model.Stats(*(ok[name] for name in STATS_FIELDS)))
    _want(isinstance(ok, str), where, "ok value is hex, an int, a bool, stats or null")
    try:
        return Ok(bytes.fromhex(ok))
    except ValueError:
        raise TraceError(f"{where}: ok value {ok!r} is not hex") from None
