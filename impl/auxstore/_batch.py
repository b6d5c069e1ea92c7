"""Validation and snapshot of what a caller hands to a store: one batch
checker for ``BlockObjectStore.put`` and ``BackgroundBlockObjectStore.put``.

Everything here is taken *by value* at the call: keys become exact ``str``
objects, payloads exact ``bytes`` copies, key lists tuples. After
``check_batch`` returns, no caller object is referenced, so nothing the
caller does later (mutating a list, a ``bytearray``, an object whose
``payload`` is a property) and no caller code (a str subclass's
``__hash__``/``__eq__``) can reach the store. All caller code (iterators,
properties, buffer exports, ``__hash__`` of str subclasses) runs inside
``check_batch``, before the store changes anything.

Which inputs are accepted and which error wins follow
``auxspec.reference.binding`` and the model's ``strict`` profile: the batch shape,
then each object's key, then its payload (type, then length), then the
retain keys, then the release keys. Every rejection is a ``TypeError`` or
``ValueError`` whose message is readable whatever the bad value is (its
``__repr__`` may raise, its ``__class__`` may lie).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["Batch", "as_key", "check_batch", "key_tuple", "read_keys", "safe_repr", "type_name"]

_NOT_KEY_LISTS = (str, bytes, bytearray)
_str_value = str.__str__  # an exact-str copy of a str subclass instance, whatever it overrides


_new_batch = tuple.__new__


class Batch(NamedTuple):
    """A validated put, owned by the store.

    ``objects`` is the batch de-duplicated as a dict would (each key at its
    first position, with its last payload); every key an exact ``str``,
    every payload an exact ``bytes`` of the checked length.
    """

    objects: dict[str, bytes]
    retain_keys: tuple[str, ...]
    release_keys: tuple[str, ...]


def type_name(value: object) -> str:
    """The name of ``value``'s real type (``type()``, not ``__class__``)."""
    try:
        name = type.__dict__["__name__"].__get__(type(value))
    except Exception:  # a metaclass that breaks even this
        return "<unnamed type>"
    return name if type(name) is str else "<unnamed type>"


def safe_repr(value: object, limit: int = 80) -> str:
    """``repr(value)`` for a message, never raising, cut to ``limit`` characters."""
    if type(value) is str:
        text = repr(value)
    else:
        try:
            text = repr(value)
        except Exception:
            return f"<{type_name(value)} object with a broken __repr__>"
        if type(text) is not str:
            return f"<{type_name(value)} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_key(value: object, what: str) -> str:
    """``value`` as an exact ``str``, or TypeError.

    A ``str`` subclass is accepted by value (copied to a plain ``str``, so
    its own methods never run in the store) if it can be hashed; one whose
    ``__hash__`` raises is a TypeError, as an unhashable key would be.
    """
    if type(value) is str:
        return value
    if not issubclass(type(value), str):  # type(), not isinstance: __class__ can lie
        raise TypeError(f"{what} must be a str; got {safe_repr(value)} of type {type_name(value)}")
    try:
        hash(value)
    except Exception as error:
        raise TypeError(
            f"{what} of type {type_name(value)} cannot be hashed: {type_name(error)}: {safe_repr(error)}"
        ) from error
    return _str_value(value)


def _as_list(values: object, what: str) -> list[object] | tuple[object, ...]:
    if type(values) is list or type(values) is tuple:
        return values
    if isinstance(values, _NOT_KEY_LISTS) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be an iterable of str keys, not a {type_name(values)}")
    return list(values)


def key_tuple(values: object, what: str) -> tuple[str, ...]:
    """A key list (any iterable but a ``str`` or bytes, which would iterate
    characters) as a tuple of exact ``str`` keys, or TypeError."""
    if type(values) is tuple and not values:
        return ()
    keys = _as_list(values, what)
    if list(map(type, keys)).count(str) == len(keys):  # all exact str, at C speed
        return keys if type(keys) is tuple else tuple(keys)  # type: ignore[return-value,arg-type]
    return tuple(as_key(key, f"a key of {what}") for key in keys)


def read_keys(values: object) -> list[str]:
    """A read's key list as a list of exact ``str`` keys, or TypeError. A list
    that already is one is returned as it is (no copy): reads finish before
    the caller runs again."""
    if type(values) is list and list(map(type, values)).count(str) == len(values):
        return values
    return list(key_tuple(values, "keys"))


def check_batch(
    objects: object,
    retain_keys: object = (),
    release_keys: object = (),
    *,
    object_nbytes: int | None,
) -> Batch:
    """Validate and snapshot one put's arguments; TypeError/ValueError on bad input.

    ``object_nbytes`` is the payload length to enforce, or None to check
    only that payloads are bytes-like (a store that states no fixed size).
    Nothing is assumed of any store: the caller decides what to do with the
    ``Batch`` (``BlockObjectStore`` applies it; the background store queues
    it and can pass ``[BlockObject(k, p) for k, p in batch.objects.items()]``
    to any inner store, which de-duplicates to the same effect).

    Caller code may raise anything (an iterator, a property); such an
    exception propagates unchanged, as it would from a plain loop.
    """
    if (type(objects) is not list and type(objects) is not tuple) and (
        isinstance(objects, _NOT_KEY_LISTS) or not isinstance(objects, Iterable)
    ):
        raise TypeError(f"objects must be an iterable of objects with key and payload, not {type_name(objects)}")
    batch: dict[str, bytes] = {}
    for obj in objects:
        try:
            key = obj.key
            payload = obj.payload
        except AttributeError:
            raise TypeError(f"object of type {type_name(obj)} has no key and payload") from None
        if type(key) is not str:
            key = as_key(key, "key")
        if type(payload) is not bytes:
            payload = _payload_bytes(payload, key)
        if len(payload) != object_nbytes and object_nbytes is not None:  # the common case tests once
            raise ValueError(f"payload of {key!r} is {len(payload)} bytes; object_nbytes is {object_nbytes}")
        batch[key] = payload
    # The common no-pins put skips the calls; tuple.__new__ skips the
    # NamedTuple's Python-level constructor (both cost more than the rest of
    # an empty put's validation).
    retains = () if type(retain_keys) is tuple and not retain_keys else key_tuple(retain_keys, "retain_keys")
    releases = () if type(release_keys) is tuple and not release_keys else key_tuple(release_keys, "release_keys")
    return _new_batch(Batch, (batch, retains, releases))


def _payload_bytes(payload: object, key: str) -> bytes:
    """A payload that is not exact ``bytes`` as a ``bytes`` copy of its raw
    bytes (any buffer but ``str``), or TypeError."""
    try:
        view = memoryview(payload)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"payload of {key!r} must be bytes-like, not {type_name(payload)}") from None
    with view:
        return view.tobytes()
