"""Op values as the Python arguments a caller passes, in the op's form.

This is the argument binding on the target's side: it builds ``BlockObject``
batches, key lists of each form, buffers of each shape, and what the caller
does to its own values once a call has returned (``Call.after``). The op
table's ``call`` entries use it; nothing here knows op kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from auxspec.engine.ops import Bad, Objects, ObjectValue
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


_BAD_VALUES: dict[str, Callable[[], Any]] = {"str": lambda: "k0", "int": lambda: 7}


def passed(values: tuple[Any, ...] | Bad, form: str) -> Any:
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
    """A put's Python batch, made fresh for one call, and what the caller
    does to its own values once the call has returned."""

    objects: Any
    after: Callable[[], None] | None = None


def batch(objects: Objects, form: str) -> Call:
    """The objects of a put as the caller of ``form`` passes them."""
    if form == "list" and not isinstance(objects, Bad) and not any(isinstance(obj, Bad) for obj in objects):
        # The common case, kept cheap for the fuzzers.
        return Call([BlockObject(key, payload) for key, payload in objects])  # type: ignore[arg-type, misc]
    made = [] if isinstance(objects, Bad) else [_object(obj, form) for obj in objects]
    return Call(passed(objects if isinstance(objects, Bad) else tuple(made), form), _scribble(made, form))


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


def buffer(size: int | Bad, readonly: bool, form: str) -> tuple[bytearray | bytes | None, Any]:
    """A read buffer of ``form``: the memory behind it (None for a non-buffer)
    and the object passed."""
    if isinstance(size, Bad):
        if size.what == "strided":
            every_other = bytearray(2 * 8 + 1)
            return every_other, memoryview(every_other)[::2]
        return None, None
    memory: bytearray | bytes = bytes(size) if readonly else bytearray(size)
    if form == "list":
        return memory, memory
    view = memoryview(memory)
    return memory, view if form == "tuple" else view.cast("c")
