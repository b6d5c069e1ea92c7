"""Python values to the model's alphabet, and the model's outcomes to exceptions.

The model speaks in ``str`` keys, ``bytes`` payloads and error kinds. This
module is the one place that says which Python values are valid keys,
payloads and buffers, which exception each kind raises in each profile, and
which kind a target's exception stands for.
"""

from __future__ import annotations

from collections.abc import Iterable

from auxspec.models.sequential import Invalid, Item, KeyArg, Kind, PayloadArg
from auxstore import (
    BlockObjectStoreError,
    CapacityError,
    MissingKeyError,
    UnreferencedKeyError,
)


def as_key(value: object) -> KeyArg:
    """A key is any ``str``; anything else is invalid."""
    return value if isinstance(value, str) else Invalid(f"key of type {type(value).__name__}")


def as_payload(value: object) -> PayloadArg:
    """A payload is any object with the buffer protocol except ``str``, taken as
    its raw bytes (a snapshot: later changes to the caller's buffer do not leak in)."""
    try:
        with memoryview(value) as view:  # type: ignore[arg-type]
            return view.tobytes()
    except TypeError:
        return Invalid(f"payload of type {type(value).__name__}")


def as_keys(values: object) -> tuple[KeyArg, ...]:
    """A key list is any iterable but a ``str`` or bytes (which would iterate
    characters: almost always a caller's slip)."""
    if isinstance(values, (str, bytes, bytearray)) or not isinstance(values, Iterable):
        return (Invalid(f"key list of type {type(values).__name__}"),)
    return tuple(as_key(value) for value in values)


def as_items(objects: object) -> tuple[Item, ...]:
    """A batch is any iterable of objects with ``key`` and ``payload``
    attributes (auxstore's ``BlockObject``, vLLM's, a port's)."""
    if isinstance(objects, (str, bytes, bytearray)) or not isinstance(objects, Iterable):
        return ((Invalid(f"batch of type {type(objects).__name__}"), Invalid("no payload")),)
    items: list[Item] = []
    for obj in objects:
        if not (hasattr(obj, "key") and hasattr(obj, "payload")):
            bad = Invalid(f"object of type {type(obj).__name__} without key and payload")
            items.append((bad, bad))
        else:
            items.append((as_key(obj.key), as_payload(obj.payload)))
    return tuple(items)


def as_size(value: object) -> int | Invalid:
    """Sizes are ints, taken by value: an int subclass counts as its plain int
    value (``int.__index__``; its own ``__index__``, ``__int__`` or arithmetic
    may lie). ``bool`` is rejected though it is an int subclass; the type is
    ``type()``'s, whatever ``__class__`` claims."""
    kind = type(value)
    if kind is int:
        return value  # type: ignore[return-value]
    if issubclass(kind, int) and kind is not bool:
        return int.__index__(value)  # type: ignore[arg-type]
    return Invalid(f"size of type {kind.__name__}")


def as_buffer(value: object) -> memoryview | Invalid:
    """A read buffer is any writable, C-contiguous buffer, seen as bytes."""
    try:
        view = memoryview(value)  # type: ignore[arg-type]
    except TypeError:
        return Invalid(f"buffer of type {type(value).__name__}")
    if view.readonly or not view.c_contiguous:
        view.release()
        return Invalid("read-only or non-contiguous buffer")
    return view.cast("B")


def exception_for(kind: Kind, profile: str, message: str) -> Exception:
    """The exception a store of ``profile`` raises for ``kind``.

    ``upstream`` raises exactly what vLLM raises (the base error class and a
    bare ``KeyError``); ``strict`` raises the narrower subclasses.
    """
    if kind is Kind.CLOSED:
        return RuntimeError(message)
    if kind in (Kind.PAYLOAD, Kind.BUFFER, Kind.CONFIG):
        return ValueError(message)
    if kind is Kind.TYPE:
        return TypeError(message)
    if profile == "upstream":
        if kind is Kind.UNREFERENCED:
            return KeyError(message)
        return BlockObjectStoreError(message)
    narrow: dict[Kind, type[BlockObjectStoreError]] = {
        Kind.CAPACITY: CapacityError,
        Kind.MISSING: MissingKeyError,
        Kind.UNREFERENCED: UnreferencedKeyError,
    }
    return narrow[kind](message)


def is_store_error(error: BaseException) -> bool:
    # By name, so that a port's own BlockObjectStoreError class (vLLM's, say)
    # is recognised as well as auxstore's.
    return any(cls.__name__ == "BlockObjectStoreError" for cls in type(error).__mro__)


def classify(op: str, error: BaseException) -> Kind | None:
    """The kind a target's exception stands for in operation ``op`` (``new``,
    ``put``, ``get``, ``read_into``, ``close``), or None when the exception is
    not one the protocol allows (a divergence in itself)."""
    if isinstance(error, KeyError) and op == "put":
        return Kind.UNREFERENCED
    if is_store_error(error):
        if op == "put":
            return Kind.CAPACITY
        if op in ("get", "read_into"):
            return Kind.MISSING
        return None
    if isinstance(error, TypeError):
        return Kind.TYPE
    if isinstance(error, ValueError):
        return {"new": Kind.CONFIG, "put": Kind.PAYLOAD, "read_into": Kind.BUFFER}.get(op)
    # A port's own closed-store error may subclass RuntimeError; the
    # interpreter's own subclasses are not a store's answer.
    if isinstance(error, RuntimeError) and not isinstance(error, (RecursionError, NotImplementedError)):
        return Kind.CLOSED
    return None
