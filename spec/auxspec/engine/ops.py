"""The op alphabet's values: what a trace is made of.

A trace is a store's parameters plus a list of ops. Values inside ops are the
Python values a caller would pass, invalid ones included: a key is a ``str``
(or an ``int``, which is invalid; or a ``KeyStr``, a ``str`` subclass that
counts as its plain value, as every ``str`` subclass key does), a payload is
``bytes`` (or ``None``, invalid; a put's ``payloads`` says what kind of
buffer a Python caller passes them in, ``PAYLOAD_KINDS``), a read buffer is a size and whether it is
read-only. ``Bad`` stands where a whole key list, batch, object or buffer
has the wrong shape (a ``str``, empty or not, or empty ``bytes`` given as a
key list, an object without ``key`` and ``payload``, a buffer that is not
one).

An op's ``form`` says how a Python driver passes the valid values. It never
changes the outcome, so ports in other languages ignore it:

- ``list``: lists, ``BlockObject`` with ``bytes``, a ``bytearray`` buffer.
- ``tuple``: tuples, ``BlockObject`` with a ``bytearray`` payload that the
  caller overwrites once the call returns, a ``memoryview`` buffer.
- ``iter``: one-pass generators, plain objects (not ``BlockObject``) whose
  payload the caller replaces once the call returns, a buffer cast to
  format ``c``.
- ``reenter-put``, ``reenter-get``, ``reenter-close`` (strict): as ``iter``,
  and each generator first makes that call on the same store, which must be
  refused (``REENTRANT_FORMS``).

A read buffer's ``shape`` (``BUFFER_SHAPES``) names the other buffers a
Python caller may pass (a ``bytearray`` subclass, a ``memoryview`` slice
with an offset, ``array.array`` and casts with multi-byte items, a 2-D view,
``mmap``, ``ctypes`` arrays); like the form it never changes the outcome.

What a target offers decides which ops a trace may hold (``Features``):
``read_into``; the observations ``flush``, ``len``, ``in`` and ``with``
(``OBSERVE``); ``stats`` (``STATS``); the Python call forms and shapes (``PYTHON``; a port
behind the process protocol receives plain JSON values).

Everything an op kind *does* (its model step, its Python call, its bytes,
its JSON, how it is shown) is in its row of ``auxspec.engine.table``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, TypeVar


@dataclass(frozen=True)
class Bad:
    """A value of the wrong shape (strict only): ``what`` is one of ``SHAPES``."""

    what: str


# Bad shapes and where each may stand.
# A key list or batch given as the str "k0", the int 7, or an empty str or
# bytes (which a store that iterates before it checks takes as empty).
BAD_LISTS = ("str", "int", "empty-str", "empty-bytes")
BAD_OBJECT = "object"  # an object with neither key nor payload, inside a batch
BAD_BUFFERS = ("not-buffer", "strided")  # None, or a writable buffer that is not C-contiguous
SHAPES = (*BAD_LISTS, BAD_OBJECT, *BAD_BUFFERS)

KeyValue = str | int
PayloadValue = bytes | None
KeyList = tuple[KeyValue, ...] | Bad
ObjectValue = tuple[KeyValue, PayloadValue] | Bad
Objects = tuple[ObjectValue, ...] | Bad

PLAIN_FORMS = ("list", "tuple", "iter")
# The iter form whose generators, before their first key, call back into the
# store (semantics.md section 12, strict): the inner call ``put([])``,
# ``get_concatenated([])`` or ``close()`` must be refused (any exception) and
# change nothing, and the outer call goes on as if it had not been made.
REENTRANT_FORMS = ("reenter-put", "reenter-get", "reenter-close")
FORMS = (*PLAIN_FORMS, *REENTRANT_FORMS)

# The shape of a valid read_into buffer beyond its form (``ReadInto.shape``):
# "plain" is the form's own buffer; the others are every other kind of
# writable, C-contiguous buffer a Python caller may pass. Each is counted in
# bytes and written from its own start (engine.calls builds them).
BUFFER_SHAPES = (
    "plain",
    "subclass",  # an instance of a bytearray subclass
    "offset",  # a memoryview slice that starts 3 bytes into a larger bytearray
    "array-B",  # array.array('B')
    "array-H",  # array.array('H'): 2-byte items
    "array-I",  # array.array('I'): 4-byte items
    "array-d",  # array.array('d'): 8-byte items
    "cast-I",  # memoryview(bytearray).cast('I')
    "cast-Q",  # memoryview(bytearray).cast('Q')
    "2d",  # a 2-D memoryview, 2 rows
    "mmap",  # an anonymous mmap.mmap
    "ctypes",  # a ctypes c_ubyte array
    "ctypes-I",  # a ctypes c_uint32 array
)
# How many bytes one step of a shape's size is (its items', or its rows' count).
SHAPE_UNIT = {"array-H": 2, "array-I": 4, "array-d": 8, "cast-I": 4, "cast-Q": 8, "2d": 2, "ctypes-I": 4}

# What kind of object a put's payloads are (``Put.payloads``), beyond the
# form's own ("bytes"; semantics.md section 11: any buffer but ``str``,
# taken as its bytes when the call is made). Every payload of the put is
# of that kind; the spec takes each as its bytes, so the kind never changes
# the outcome, except "str", which is refused (strict only).
PAYLOAD_KINDS = (
    "bytes",  # the form's own: bytes (list), a bytearray changed afterwards (tuple), a replaced attribute (iter)
    "bytearray",  # a bytearray
    "view",  # a memoryview of a bytes object
    "offset",  # a memoryview slice 3 bytes into a larger bytearray, other bytes around it
    "readonly",  # a read-only memoryview of a bytearray
    "array-H",  # array.array('H'): 2-byte items
    "array-I",  # array.array('I'): 4-byte items
    "array-d",  # array.array('d'): 8-byte items
    "cast-Q",  # memoryview(bytearray).cast('Q'): 8-byte items
    "changed",  # a memoryview of a bytearray the caller overwrites once the call returns
    "shared",  # every payload a slice of one bytearray, overwritten once the call returns
    "strided",  # a memoryview that is not C-contiguous (every other byte of a larger bytearray); strict only
    "str",  # a str of object_nbytes characters: refused (strict only)
)
# How many bytes one item of a payload kind is: its payload size is a multiple of it.
PAYLOAD_UNIT = {"array-H": 2, "array-I": 4, "array-d": 8, "cast-Q": 8}
# The kinds vLLM's module takes (it copies a payload by slice assignment into
# its mmap, which takes any C-contiguous buffer of the right size): the
# others are undefined under ``upstream`` and never generated there.
UPSTREAM_PAYLOADS = tuple(kind for kind in PAYLOAD_KINDS if kind not in ("strided", "str"))
REFUSED_PAYLOADS = ("str",)


@dataclass(frozen=True)
class Put:
    objects: Objects = ()
    retain: KeyList = ()
    release: KeyList = ()
    form: str = "list"
    payloads: str = "bytes"  # one of PAYLOAD_KINDS: the kind of every payload of the batch
    name: ClassVar[str] = "put"


@dataclass(frozen=True)
class Get:
    keys: KeyList = ()
    form: str = "list"
    name: ClassVar[str] = "get"


@dataclass(frozen=True)
class ReadInto:
    keys: KeyList = ()
    buffer: int | Bad = 0
    readonly: bool = False
    form: str = "list"
    shape: str = "plain"  # one of BUFFER_SHAPES; the buffer's size is in bytes, a multiple of SHAPE_UNIT
    name: ClassVar[str] = "read_into"


@dataclass(frozen=True)
class Close:
    name: ClassVar[str] = "close"


@dataclass(frozen=True)
class Flush:
    name: ClassVar[str] = "flush"


@dataclass(frozen=True)
class Len:
    name: ClassVar[str] = "len"


@dataclass(frozen=True)
class Contains:
    key: KeyValue = ""
    name: ClassVar[str] = "contains"


@dataclass(frozen=True)
class Stats:
    name: ClassVar[str] = "stats"


@dataclass(frozen=True)
class Enter:
    """``store.__enter__()``: the same step as ``flush``; it returns the store."""

    name: ClassVar[str] = "enter"


@dataclass(frozen=True)
class Exit:
    """``store.__exit__(None, None, None)``: the same step as ``close``."""

    name: ClassVar[str] = "exit"


Op = Put | Get | ReadInto | Close | Flush | Len | Contains | Stats | Enter | Exit

SizeValue = int | float | str | None  # what a trace may pass as a size; only an int (not a bool) is valid


class SizeInt(int):
    """A size given as an ``int`` subclass (as an ``IntEnum`` member or a
    caller's own int type is): it counts as its plain int value
    (semantics.md, "Keys and sizes are taken by value"). Written to a trace
    file it is a plain int."""

    def __repr__(self) -> str:
        return f"SizeInt({int(self)})"


class SpelledInt(SizeInt):
    """A size a port behind the process protocol is sent spelled as ``json``
    (``-0``; docs/protocol.md, "Sizes"): its value is the int it spells,
    which is what a Python store is given and the model sees."""

    json: str

    def __repr__(self) -> str:
        return self.json


class SpelledFloat(float):
    """A size a port is sent spelled as ``json`` (``1E0``, ``4.0``): JSON
    numbers that are not integers, whatever their value; a Python store is
    given the float, which is not a size either."""

    json: str

    def __repr__(self) -> str:
        return self.json


def spelled(text: str) -> SpelledInt | SpelledFloat:
    """The size ``text`` spells as a JSON number, keeping that spelling."""
    is_int = text.lstrip("-").isdigit()
    value: SpelledInt | SpelledFloat = SpelledInt(int(text)) if is_int else SpelledFloat(float(text))
    value.json = text
    return value


class KeyStr(str):
    """A key given as a ``str`` subclass (as a caller's own str type or a
    ``StrEnum`` member is): it counts as its plain str value (semantics.md,
    "Keys and sizes are taken by value"), so the model is given that value
    (``engine.fields.model_key``). Written to a trace file, or sent to a port
    behind the process protocol, it is a plain str. Its own ``__hash__`` and
    ``__eq__`` are str's: it tests a port's type checks, not its hashing."""

    def __repr__(self) -> str:
        return f"KeyStr({str.__repr__(self)})"


def plain_key(value: KeyValue) -> KeyValue:
    """``value`` as a plain ``str`` if it is a ``str`` (of any subclass);
    other values (an invalid int key) as they are."""
    return str.__str__(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class Trace:
    profile: str
    max_bytes: SizeValue
    object_nbytes: SizeValue
    ops: tuple[Op, ...] = field(default=())


# ----------------------------------------------------------------- features

READ_INTO = "read_into"  # read_into(keys, buffer)
OBSERVE = "observe"  # flush(), len(store), key in store, with store
STATS = "stats"  # stats(): a port may offer it without the other observations
PYTHON = "python"  # the forms and Bad shapes: only a Python store can be handed them
# Not a target's: invalid values under ``upstream`` too, where the model
# raises UndefinedInput (the model harness checks that it does).
UNDEFINED = "undefined"
Features = frozenset[str]
ALL: Features = frozenset({READ_INTO, OBSERVE, STATS, PYTHON})
# A port behind the process protocol that makes no handshake (protocol 1);
# one that does (protocol 2) declares its own (drivers.protocol).
CORE: Features = frozenset({READ_INTO})


_Call = TypeVar("_Call")


def runs(ops: tuple[_Call, ...], start: int = 0, end: int | None = None) -> list[tuple[int, _Call, int]]:
    """``ops[start:end]`` as runs of the same call made in a row: the index
    of each run's first op, the op and how many times it is made (what a
    report prints once with "× N", as a trace file writes it once with
    ``times``)."""
    found: list[tuple[int, _Call, int]] = []
    stop = len(ops) if end is None else end
    for index in range(start, stop):
        op = ops[index]
        if found and same_call(found[-1][1], op):
            first, same, count = found[-1]
            found[-1] = (first, same, count + 1)
        else:
            found.append((index, op, 1))
    return found


def numbered(first: int, count: int) -> str:
    """The 1-based step number of a run of ``count`` ops from index ``first``."""
    return f"{first + 1}" if count == 1 else f"{first + 1}-{first + count}"


def same_call(a: object, b: object) -> bool:
    """The same call: equal, and shown alike (a ``KeyStr`` key equals its
    plain ``str`` but is a different call for a Python port)."""
    return a is b or (a == b and repr(a) == repr(b))
