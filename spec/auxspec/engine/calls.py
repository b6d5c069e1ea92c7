"""Op values as the Python arguments a caller passes, in the op's form.

This is the argument binding on the target's side: it builds ``BlockObject``
batches, key lists of each form, buffers of each shape, and what the caller
does to its own values once a call has returned (``Call.after``). The op
table's ``call`` entries use it; nothing here knows op kinds.
"""

from __future__ import annotations

import ctypes
import mmap
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from auxspec.engine.ops import PAYLOAD_UNIT, REENTRANT_FORMS, Bad, Objects, ObjectValue, PayloadValue
from auxstore import BlockObject


class OddReturn(Exception):
    """A target's call returned what no caller of the store could use (a
    ``str`` from ``get_concatenated``, a count that is not an int): a
    divergence in itself, reported in one line naming the method."""


def returned(method: str, value: object, wanted: str) -> OddReturn:
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return OddReturn(f"{method} returned {type(value).__name__} {shown}, not {wanted}")


def as_bytes(method: str, value: object) -> bytes:
    """What a read returned, as bytes: any bytes-like object but ``str``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise returned(method, value, "bytes")


def as_count(method: str, value: object) -> int:
    """A count a call returned (``read_into``'s bytes written, ``len``): an int, not a bool."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    raise returned(method, value, "an int")


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


_BAD_VALUES: dict[str, Callable[[], Any]] = {
    "str": lambda: "k0",
    "int": lambda: 7,
    "empty-str": lambda: "",
    "empty-bytes": lambda: b"",
}


class Reentry:
    """The caller code of a reentrant form (``ops.REENTRANT_FORMS``): each
    generator it makes first calls the same store again, and records whether
    that inner call was refused. The spec (semantics.md section 12) says it
    must be, with no change; the outer call then goes on as if it had not
    been made, so the outer outcome is the model's as for any form."""

    __slots__ = ("_inner", "_name", "_op", "_outer", "accepted")

    # The ops (by identity) whose caller code made a call that was not
    # refused: what engine.deviations asks to name a divergence exactly (the
    # Mismatch of an OddReturn carries only its text). An op run again starts
    # afresh; each entry is an op that ended its trace.
    unrefused: ClassVar[dict[int, object]] = {}

    def __init__(self, form: str, store: Any, outer: str, op: object = None) -> None:
        Reentry.unrefused.pop(id(op), None)
        self._op = op
        self._name = form.removeprefix("reenter-")
        self._inner: Callable[[], object] = {
            "put": lambda: store.put([]),
            "get": lambda: store.get_concatenated([]),
            "close": store.close,
        }[self._name]
        self._outer = outer
        self.accepted = 0  # inner calls that returned instead of being refused

    @staticmethod
    def of(op: Any, store: Any, outer: str) -> Reentry | None:
        """The caller code of ``op``'s form, if it is a reentrant one."""
        return Reentry(op.form, store, outer, op) if op.form in REENTRANT_FORMS else None

    def keys(self, values: Any) -> Any:
        try:
            self._inner()
        except Exception:  # refused, as it must be; the caller code swallows it and goes on
            pass
        else:
            self.accepted += 1
        yield from values

    def check(self) -> None:
        """An inner call that was not refused is a divergence in itself."""
        if self.accepted:
            Reentry.unrefused[id(self._op)] = self._op
            inner = {"put": "put([])", "get": "get_concatenated([])", "close": "close()"}[self._name]
            # Short enough for one report line (160 characters) with the call names at their longest.
            raise OddReturn(
                f"{inner} from caller code inside {self._outer}() returned instead of being refused "
                "(ReentrantCallError: semantics.md section 12)"
            )


def passed(values: tuple[Any, ...] | Bad, form: str, reentry: Reentry | None = None) -> Any:
    """A key list or batch as the caller of ``form`` passes it (``reentry``:
    the caller code of a reentrant form, which the generator runs first)."""
    if isinstance(values, Bad):
        return _BAD_VALUES[values.what]()
    if form == "tuple":
        return values
    if reentry is not None:
        return reentry.keys(values)
    if form != "list":  # iter, and a reentrant form passed without its caller code
        return (value for value in values)
    return list(values)


@dataclass
class Call:
    """A put's Python batch, made fresh for one call, and what the caller
    does to its own values once the call has returned."""

    objects: Any
    after: Callable[[], None] | None = None


def batch(objects: Objects, form: str, reentry: Reentry | None = None, payloads: str = "bytes") -> Call:
    """The objects of a put as the caller of ``form`` passes them, their
    payloads of kind ``payloads`` (``ops.PAYLOAD_KINDS``)."""
    if isinstance(objects, Bad):
        return Call(passed(objects, form, reentry))
    if form == "list" and payloads == "bytes" and not any(isinstance(obj, Bad) for obj in objects):
        # The common case, kept cheap for the fuzzers.
        return Call([BlockObject(key, payload) for key, payload in objects])  # type: ignore[arg-type, misc]
    if payloads != "bytes":
        kinds = PayloadMaker(payloads, objects)
        made = [_Shapeless() if isinstance(obj, Bad) else _holding(obj[0], kinds.make(obj[1]), form) for obj in objects]
        return Call(passed(tuple(made), form, reentry), kinds.after)
    made = [_object(obj, form) for obj in objects]
    return Call(passed(tuple(made), form, reentry), _scribble(made, form))


def _holding(key: Any, payload: Any, form: str) -> Any:
    """A batch object holding a made payload: a ``BlockObject`` (lists and
    tuples), a plain object (one-pass generators)."""
    return BlockObject(key, payload) if form in ("list", "tuple") else _Loose(key, payload)


_PAYLOAD_PAD = b"\xaa\xbb\xcc"  # the bytes around an offset view: a store that copies its base object gets them


class PayloadMaker:
    """The payloads of one put, of one kind (``ops.PAYLOAD_KINDS``), and what
    the caller does to them once the call has returned (``after``). A
    payload whose size is not whole items of the kind (a wrong-length one)
    and a None payload go as they are."""

    def __init__(self, kind: str, objects: tuple[ObjectValue, ...]) -> None:
        self.kind = kind
        self._changed: list[bytearray] = []  # the caller's buffers it overwrites afterwards
        self._shared: memoryview | None = None
        if kind == "shared":
            sizes = [len(obj[1]) for obj in objects if not isinstance(obj, Bad) and obj[1] is not None]
            whole = bytearray(sum(sizes))
            self._changed.append(whole)
            self._shared = memoryview(whole)

    def make(self, payload: PayloadValue) -> Any:
        if payload is None:
            return None
        kind = self.kind
        if len(payload) % PAYLOAD_UNIT.get(kind, 1):
            return payload
        if kind == "bytearray":
            return bytearray(payload)
        if kind == "view":
            return memoryview(bytes(payload))
        if kind == "offset":
            whole = bytearray(_PAYLOAD_PAD + payload + _PAYLOAD_PAD)
            return memoryview(whole)[len(_PAYLOAD_PAD) : len(_PAYLOAD_PAD) + len(payload)]
        if kind == "readonly":
            return memoryview(bytearray(payload)).toreadonly()
        if kind.startswith("array-"):
            return array(kind[-1], payload)
        if kind == "cast-Q":
            return memoryview(bytearray(payload)).cast("Q")
        if kind == "changed":
            mine = bytearray(payload)
            self._changed.append(mine)
            return memoryview(mine)
        if kind == "shared":
            assert self._shared is not None
            part, self._shared = self._shared[: len(payload)], self._shared[len(payload) :]
            part[:] = payload
            return part
        if kind == "strided":
            every_other = bytearray(2 * len(payload))
            every_other[::2] = payload
            return memoryview(every_other)[::2]
        if kind == "str":
            return payload.decode("latin-1")
        raise ValueError(f"unknown payload kind {kind!r}")

    def after(self) -> None:
        """Overwrite the caller's buffers the kind says it reuses: a store that
        kept a view instead of a copy now holds other bytes."""
        for mine in self._changed:
            mine[:] = b"\xee" * len(mine)


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


@dataclass
class MadeBuffer:
    """A read buffer made for one call: the object passed, the memory behind
    it (None for a non-buffer) and where the buffer starts in that memory."""

    passed: Any
    memory: Any = None  # anything memoryview() reads as the caller's whole memory
    start: int = 0

    def _whole(self) -> bytes | bytearray:
        memory = self.memory
        return memory if type(memory) in (bytearray, bytes) else memoryview(memory).cast("B").tobytes()

    def room(self) -> int:
        """The bytes the buffer passed offers (not its memory's padding around it)."""
        with memoryview(self.passed) as view:
            return view.nbytes

    def changed(self) -> bool:
        """Whether any byte of the caller's memory changed (it was all zeros)."""
        whole = self._whole()
        return whole.count(0) != len(whole)

    def written(self, count: Any) -> bytes:
        """What the caller sees after the store said it wrote ``count`` bytes:
        those bytes, from the buffer's own start; or, when the store changed
        any byte of the caller's memory outside them (before the buffer's
        start, past what it wrote), that whole memory, which is never what
        the spec says."""
        whole = self._whole()
        start = self.start
        data = bytes(whole[start : start + count])
        end = start + len(data)
        if whole.count(0, 0, start) != start or whole.count(0, end) != len(whole) - end:
            return bytes(whole)
        return data


_PAD = 3  # the offset shape's bytes before (and after) the view


class _Sub(bytearray):
    """A bytearray subclass, as a caller's own buffer type may be."""


class _SubBytes(bytes):
    """A bytes subclass: a read-only buffer of a caller's own type."""


def buffer(size: int | Bad, readonly: bool, form: str, shape: str = "plain") -> MadeBuffer:
    """A read buffer of ``size`` bytes in ``form`` and ``shape``
    (``ops.BUFFER_SHAPES``), zero-filled; read-only when ``readonly``."""
    if isinstance(size, Bad):
        if size.what == "strided":
            every_other = bytearray(2 * 8 + 1)
            return MadeBuffer(memoryview(every_other)[::2], every_other)
        return MadeBuffer(None)
    if shape == "plain" or (size == 0 and shape in ("mmap", "2d")):  # neither can be empty: the form's
        memory: bytearray | bytes = bytes(size) if readonly else bytearray(size)
        if form == "list":
            return MadeBuffer(memory, memory)
        view = memoryview(memory)
        return MadeBuffer(view if form == "tuple" else view.cast("c"), memory)
    return _SHAPES[shape](size, readonly)


def _readonly(made: MadeBuffer, readonly: bool) -> MadeBuffer:
    if readonly:
        made.passed = memoryview(made.passed).toreadonly()
    return made


def _array(code: str) -> Callable[[int, bool], MadeBuffer]:
    def make(size: int, readonly: bool) -> MadeBuffer:
        items = array(code, bytes(size))
        return _readonly(MadeBuffer(items, items), readonly)

    return make


def _cast(code: Any) -> Callable[[int, bool], MadeBuffer]:
    def make(size: int, readonly: bool) -> MadeBuffer:
        memory = bytearray(size)
        return _readonly(MadeBuffer(memoryview(memory).cast(code), memory), readonly)

    return make


def _subclass(size: int, readonly: bool) -> MadeBuffer:
    memory = _SubBytes(size) if readonly else _Sub(size)
    return MadeBuffer(memory, memory)


def _offset(size: int, readonly: bool) -> MadeBuffer:
    memory = (bytes if readonly else bytearray)(size + 2 * _PAD)
    return MadeBuffer(memoryview(memory)[_PAD : _PAD + size], memory, _PAD)


def _rows(size: int, readonly: bool) -> MadeBuffer:
    memory = bytearray(size)
    return _readonly(MadeBuffer(memoryview(memory).cast("B", (2, size // 2)), memory), readonly)


def _mmap(size: int, readonly: bool) -> MadeBuffer:
    mapped = mmap.mmap(-1, size, prot=mmap.PROT_READ) if readonly else mmap.mmap(-1, size)
    return MadeBuffer(mapped, mapped)


def _ctypes(item: Any, unit: int) -> Callable[[int, bool], MadeBuffer]:
    def make(size: int, readonly: bool) -> MadeBuffer:
        memory = (item * (size // unit))()
        return _readonly(MadeBuffer(memory, memory), readonly)

    return make


_SHAPES: dict[str, Callable[[int, bool], MadeBuffer]] = {
    "subclass": _subclass,
    "offset": _offset,
    "array-B": _array("B"),
    "array-H": _array("H"),
    "array-I": _array("I"),
    "array-d": _array("d"),
    "cast-I": _cast("I"),
    "cast-Q": _cast("Q"),
    "2d": _rows,
    "mmap": _mmap,
    "ctypes": _ctypes(ctypes.c_ubyte, 1),
    "ctypes-I": _ctypes(ctypes.c_uint32, 4),
}
