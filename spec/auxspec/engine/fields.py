"""The kinds of value an op holds, and what each means to the model.

An op kind (a row of ``auxspec.engine.table``) lists its fields, each with
one of these kinds. Every generic part of the engine works field by field:
the codec (``codec``), the trace format (``traces``), the Python call
arguments (``calls``) and the display (``show`` here) each know the kinds,
not the ops, so a new op kind made of known kinds touches only the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from auxspec.engine.ops import (
    PAYLOAD_UNIT,
    REFUSED_PAYLOADS,
    SHAPE_UNIT,
    Bad,
    KeyList,
    KeyValue,
    Objects,
    ObjectValue,
    PayloadValue,
)
from auxspec.models import sequential as model
from auxspec.models.sequential import Invalid


@dataclass(frozen=True)
class Key:
    """One key: a ``str`` (``ops.KeyStr`` among them), or an ``int`` (invalid)."""


@dataclass(frozen=True)
class Keys:
    """A key list, or ``Bad`` (a ``str`` or an ``int`` where a list belongs);
    the decoder reads at most ``most`` keys. ``role``: "retain" or "release"
    for a put's pins (the scaled decoder releases what was retained)."""

    most: int
    role: str = ""


@dataclass(frozen=True)
class Batch:
    """A put's objects: ``(key, payload)`` pairs or ``Bad`` objects, or a
    ``Bad`` batch; the decoder reads at most ``most`` objects."""

    most: int


@dataclass(frozen=True)
class Buffer:
    """A read buffer's size, or a ``Bad`` buffer."""


@dataclass(frozen=True)
class Flag:
    """A bool (``read_into``'s read-only buffer)."""


@dataclass(frozen=True)
class Form:
    """How a Python caller passes the valid values (``ops.FORMS``)."""


@dataclass(frozen=True)
class Shape:
    """Which kind of writable buffer a Python caller passes to ``read_into``
    (``ops.BUFFER_SHAPES``; "plain" is the form's). Never changes the outcome:
    a buffer is counted in bytes and written from its own start."""


@dataclass(frozen=True)
class Payloads:
    """What kind of buffer a Python caller passes a put's payloads in
    (``ops.PAYLOAD_KINDS``; "bytes" is the form's). Never changes the
    outcome (each payload is taken as its bytes), but "str", refused."""


FieldKind = Key | Keys | Batch | Buffer | Flag | Form | Shape | Payloads


@dataclass(frozen=True)
class Field:
    """One field of an op kind: its attribute name and kind; ``required``: a
    trace line must give it (else the op's default stands)."""

    name: str
    kind: FieldKind
    required: bool = False


# ------------------------------------------------------------ model values
# The binding's rules for op values: a non-str key, a None payload, a
# read-only buffer and every Bad shape are invalid.

_BAD_KEY = (Invalid("key list of the wrong shape"),)  # as binding.as_keys reads a str or an int
_BAD_ITEM = (Invalid("object without key and payload"), Invalid("no payload"))


def model_key(value: KeyValue) -> model.KeyArg:
    # A str subclass key (ops.KeyStr) counts as its plain value, as the
    # reference store's _by_value takes it: the model sees only plain strs.
    return str.__str__(value) if isinstance(value, str) else Invalid("key that is not a str")


def model_keys(values: KeyList) -> tuple[model.KeyArg, ...]:
    return _BAD_KEY if isinstance(values, Bad) else tuple(map(model_key, values))


def _model_item(value: ObjectValue, refused: bool = False) -> model.Item:
    if isinstance(value, Bad):
        return _BAD_ITEM
    key, payload = value
    return model_key(key), payload if isinstance(payload, bytes) and not refused else Invalid("payload")


def model_items(objects: Objects, payloads: str = "bytes") -> tuple[model.Item, ...]:
    """The batch as the model takes it; ``payloads`` (``ops.PAYLOAD_KINDS``):
    a refused kind makes every payload invalid, the others are their bytes."""
    if isinstance(objects, Bad):
        return (_BAD_ITEM,)
    refused = payloads in REFUSED_PAYLOADS
    return tuple(_model_item(value, refused) for value in objects)


def model_buffer(buffer: int | Bad, readonly: bool) -> int | Invalid:
    if readonly:
        return Invalid("read-only buffer")
    return buffer if isinstance(buffer, int) else Invalid(f"buffer: {buffer.what}")


# ------------------------------------------------------------------ checks


def has_bad(kind: FieldKind, value: Any) -> bool:
    """Whether ``value`` holds a ``Bad`` shape (only a Python store can be handed one)."""
    if isinstance(value, Bad):
        return True
    return isinstance(kind, Batch) and any(isinstance(obj, Bad) for obj in value)


def python_only(kind: FieldKind, value: Any) -> bool:
    """Whether only a Python store can be handed ``value``: a ``Bad`` shape,
    a form other than plain lists, a buffer shape other than the form's."""
    return (
        has_bad(kind, value)
        or (isinstance(kind, Form) and value != "list")
        or (isinstance(kind, Shape) and value != "plain")
        or (isinstance(kind, Payloads) and value != "bytes")
    )


def payloads_fit(object_nbytes: int, payloads: str) -> bool:
    """Whether payloads of ``object_nbytes`` bytes can be of kind ``payloads``
    (whole items of its item size)."""
    return object_nbytes % PAYLOAD_UNIT.get(payloads, 1) == 0


def shape_fits(size: int | Bad, shape: str) -> bool:
    """Whether a buffer of ``size`` bytes can have ``shape`` (its size is a
    multiple of the shape's item size)."""
    return isinstance(size, Bad) or size % SHAPE_UNIT.get(shape, 1) == 0


# ------------------------------------------------------------------ display


def show(kind: FieldKind, value: Any, readonly: bool = False) -> str:
    """``value`` of ``kind`` as a caller would read it."""
    if isinstance(kind, Batch):
        if isinstance(value, Bad):
            return _shown_list(value)
        shown = (
            "<object without key and payload>" if isinstance(obj, Bad) else f"{obj[0]!r}={show_payload(obj[1])}"
            for obj in value
        )
        return f"[{', '.join(shown)}]"
    if isinstance(kind, Keys):
        return _shown_list(value)
    if isinstance(kind, Buffer):
        if isinstance(value, Bad):
            return "None" if value.what == "not-buffer" else "a buffer that is not C-contiguous"
        return f"{'read-only ' if readonly else ''}buffer of {value} bytes"
    return repr(value)


def show_buffer(value: Any, readonly: bool, shape: str) -> str:
    """A read buffer as a caller would read it, its shape included."""
    shown = show(Buffer(), value, readonly)
    return shown if shape == "plain" or isinstance(value, Bad) else f"{shown} ({_SHAPE_NAMES[shape]})"


_SHAPE_NAMES = {
    "subclass": "a bytearray subclass",
    "offset": "a memoryview slice 3 bytes into a larger bytearray",
    "array-B": "array('B')",
    "array-H": "array('H')",
    "array-I": "array('I')",
    "array-d": "array('d')",
    "cast-I": "memoryview cast to 'I'",
    "cast-Q": "memoryview cast to 'Q'",
    "2d": "a 2-D memoryview of 2 rows",
    "mmap": "an anonymous mmap",
    "ctypes": "a ctypes c_ubyte array",
    "ctypes-I": "a ctypes c_uint32 array",
}


def _shown_list(values: Any) -> str:
    if isinstance(values, Bad):
        return {
            "str": "'k0' (a str, not a list)",
            "int": "7 (not iterable)",
            "empty-str": "'' (an empty str, not a list)",
            "empty-bytes": "b'' (empty bytes, not a list)",
        }[values.what]
    return repr(list(values))


def show_payload(payload: PayloadValue) -> str:
    if payload is None:
        return "None"
    if len(payload) > 8 and payload == payload[:1] * len(payload):
        return f"{payload[:1].hex()}*{len(payload)}"  # a big object: its fill byte and size
    if len(payload) > 16:  # any other big object: its first bytes and size
        return f"{payload[:6].hex()}...({len(payload)} bytes)"
    return payload.hex()
