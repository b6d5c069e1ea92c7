"""The one op alphabet: every driver (Hypothesis, atheris, vector files, the
process protocol) speaks it, and ``decode`` is the one decoder from bytes.

A trace is a store's parameters plus a list of ops. Values inside ops are the
Python values a caller would pass, invalid ones included: a key is a ``str``
(or an ``int``, which is invalid), a payload is ``bytes`` (or ``None``,
invalid), a read buffer is a size and whether it is read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from operator import length_hint
from typing import Any, Protocol

from auxspec import binding, model
from auxspec.model import Err, Invalid, Kind, Ok, Outcome, violations
from auxstore import BlockObject, StoreSnapshot

KeyValue = str | int
PayloadValue = bytes | None


@dataclass(frozen=True)
class Put:
    objects: tuple[tuple[KeyValue, PayloadValue], ...] = ()
    retain: tuple[KeyValue, ...] = ()
    release: tuple[KeyValue, ...] = ()
    name = "put"


@dataclass(frozen=True)
class Get:
    keys: tuple[KeyValue, ...] = ()
    name = "get"


@dataclass(frozen=True)
class ReadInto:
    keys: tuple[KeyValue, ...] = ()
    buffer: int = 0
    readonly: bool = False
    name = "read_into"


@dataclass(frozen=True)
class Close:
    name = "close"


Op = Put | Get | ReadInto | Close


SizeValue = int | float | str | None  # what a trace may pass as a size; only an int is valid


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
MAX_OPS = 64


def decode(data: bytes, profile: str = "strict", read_into: bool = True) -> Trace:
    """The trace that ``data`` stands for.

    Biased so that short inputs reach the interesting states: capacities of 1-4
    (capacity 1 is the likeliest), keys from a pool of six, frequent retains so
    stores fill with pinned keys, and under ``strict`` occasional invalid values.
    ``read_into=False`` reads with ``get`` instead, for targets without it.
    """
    src = _Bytes(data)
    object_nbytes = 1 + src.next() % 4
    capacity = 1 + (src.next() % 8) // 2 if src.more() else 1
    max_bytes = capacity * object_nbytes + src.next() % object_nbytes  # a remainder is allowed
    strict = profile == "strict"
    ops: list[Op] = []
    while src.more() and len(ops) < MAX_OPS:
        choice = src.next() % 32
        if choice < 18:
            ops.append(_decode_put(src, object_nbytes, strict))
        elif choice < 25:
            ops.append(Get(_decode_keys(src, strict, 4)))
        elif choice < 31 or not strict:
            if strict and read_into:
                keys = _decode_keys(src, strict, 3)
                size = len(keys) * object_nbytes - (src.next() % 4 == 0)
                ops.append(ReadInto(keys, max(size, 0), readonly=src.next() % 16 == 0))
            else:
                ops.append(Get(_decode_keys(src, strict, 4)))
        else:
            ops.append(Close())
    return Trace(profile, max_bytes, object_nbytes, tuple(ops))


def _decode_key(src: _Bytes, strict: bool) -> KeyValue:
    byte = src.next()
    if strict and byte == 255:
        return 1  # a non-str key
    return f"k{byte % KEY_POOL}"


def _decode_keys(src: _Bytes, strict: bool, most: int) -> tuple[KeyValue, ...]:
    return tuple(_decode_key(src, strict) for _ in range(src.next() % (most + 1)))


def _decode_put(src: _Bytes, object_nbytes: int, strict: bool) -> Put:
    objects: list[tuple[KeyValue, PayloadValue]] = []
    for _ in range(src.next() % 4):
        key = _decode_key(src, strict)
        fill = src.next()
        payload: PayloadValue = bytes([fill]) * object_nbytes
        if strict and fill == 254:
            payload = bytes([fill]) * (object_nbytes + 1)  # wrong length
        elif strict and fill == 253:
            payload = None  # wrong type
        objects.append((key, payload))
    return Put(tuple(objects), _decode_keys(src, strict, 2), _decode_keys(src, strict, 2))


# ---------------------------------------------------------------- execution


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


def _key(value: KeyValue) -> model.KeyArg:
    return value if isinstance(value, str) else Invalid("key that is not a str")


def spec_step(state: model.State, op: Op) -> tuple[model.State, Outcome]:
    """One op on a model state, with the binding's rules for op values (a
    non-str key and a None payload are invalid; a read-only buffer is)."""
    if isinstance(op, Put):
        items = tuple((_key(k), p if isinstance(p, bytes) else Invalid("payload")) for k, p in op.objects)
        return model.put(state, items, tuple(map(_key, op.retain)), tuple(map(_key, op.release)))
    if isinstance(op, Get):
        return model.get_concatenated(state, tuple(map(_key, op.keys)))
    if isinstance(op, ReadInto):
        buffer: int | Invalid = Invalid("read-only buffer") if op.readonly else op.buffer
        return model.read_into(state, tuple(map(_key, op.keys)), buffer)
    return model.close(state)


def apply(store: Any, op: Op) -> Outcome:
    """Run ``op`` on ``store``; the outcome is the value or the error kind.

    An exception that no kind stands for propagates: it is a divergence the
    caller reports with its traceback.
    """
    try:
        if isinstance(op, Put):
            objects = [BlockObject(key, payload) for key, payload in op.objects]  # type: ignore[arg-type]
            store.put(objects, retain_keys=list(op.retain), release_keys=list(op.release))
            return Ok()
        if isinstance(op, Get):
            return Ok(bytes(store.get_concatenated(list(op.keys))))
        if isinstance(op, ReadInto):
            buffer: bytes | bytearray = bytes(op.buffer) if op.readonly else bytearray(op.buffer)
            written = store.read_into(list(op.keys), buffer)
            return Ok(bytes(buffer[:written]))
        store.close()
        return Ok()
    except Exception as error:
        kind = binding.classify(op.name, error)
        if kind is None:
            raise
        return Err(kind)


# ------------------------------------------------------------ trace format


FORMAT = "auxspec-trace"
VERSION = 1


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    if isinstance(outcome, Err):
        return {"error": outcome.kind.value}
    return {"ok": None if outcome.value is None else outcome.value.hex()}


def op_to_json(op: Op) -> dict[str, Any]:
    if isinstance(op, Put):
        return {
            "op": "put",
            "objects": [[k, None if p is None else p.hex()] for k, p in op.objects],
            "retain": list(op.retain),
            "release": list(op.release),
        }
    if isinstance(op, Get):
        return {"op": "get", "keys": list(op.keys)}
    if isinstance(op, ReadInto):
        return {"op": "read_into", "keys": list(op.keys), "buffer": op.buffer, "readonly": op.readonly}
    return {"op": "close"}


class TraceError(ValueError):
    """A trace or vector file that does not follow the format; names the line."""


def _want(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise TraceError(f"{where}: {what}")


def _key_from_json(value: Any, where: str) -> KeyValue:
    _want(isinstance(value, (str, int)) and not isinstance(value, bool), where, f"key must be a string, got {value!r}")
    return value  # type: ignore[no-any-return]


def _keys_from_json(value: Any, where: str) -> tuple[KeyValue, ...]:
    _want(isinstance(value, list), where, "keys must be a list")
    return tuple(_key_from_json(k, where) for k in value)


def op_from_json(line: Any, where: str) -> Op:
    _want(isinstance(line, dict) and isinstance(line.get("op"), str), where, 'an op line needs "op"')
    name = line["op"]
    if name == "put":
        objects: list[tuple[KeyValue, PayloadValue]] = []
        _want(isinstance(line.get("objects", []), list), where, "objects must be a list")
        for obj in line.get("objects", []):
            _want(isinstance(obj, list) and len(obj) == 2, where, "each object is [key, hex payload or null]")
            payload = obj[1]
            _want(payload is None or isinstance(payload, str), where, "payload must be hex or null")
            try:
                data = None if payload is None else bytes.fromhex(payload)
            except ValueError:
                raise TraceError(f"{where}: payload {payload!r} is not hex") from None
            objects.append((_key_from_json(obj[0], where), data))
        return Put(
            tuple(objects),
            _keys_from_json(line.get("retain", []), where),
            _keys_from_json(line.get("release", []), where),
        )
    if name == "get":
        return Get(_keys_from_json(line.get("keys"), where))
    if name == "read_into":
        buffer = line.get("buffer")
        _want(isinstance(buffer, int) and not isinstance(buffer, bool) and buffer >= 0, where, "buffer is a size")
        readonly = line.get("readonly", False)
        _want(isinstance(readonly, bool), where, "readonly must be true or false")
        return ReadInto(_keys_from_json(line.get("keys"), where), buffer, readonly)
    if name == "close":
        return Close()
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
    _want(ok is None or isinstance(ok, str), where, "ok value is hex or null")
    try:
        return Ok(None if ok is None else bytes.fromhex(ok))
    except ValueError:
        raise TraceError(f"{where}: ok value {ok!r} is not hex") from None
