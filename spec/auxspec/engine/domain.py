"""The input domain: every class of value the spec defines for an op's
arguments (and the store's sizes), what the spec says of each, and which
classes a run reached.

The classes are grouped by the field kinds of the op table
(``auxspec.engine.fields``): a group lists the op fields it covers from
the table itself, and ``Domain.trace`` classifies an op field by field, by
kind, so an op added to the table with known kinds is counted with no
change here. ``markdown`` renders the table docs/input-domain.md holds
(a test checks that the page matches), and the test that every class is
produced by a generator reads ``CLASSES`` too.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from auxspec.engine.codec import SPECIAL_SIZES, SPELLED_SIZES
from auxspec.engine.fields import Batch, Buffer, Flag, Form, Key, Keys, Payloads, Shape
from auxspec.engine.ops import (
    ALL,
    BAD_BUFFERS,
    BAD_LISTS,
    BUFFER_SHAPES,
    FORMS,
    PAYLOAD_KINDS,
    PYTHON,
    READ_INTO,
    REENTRANT_FORMS,
    UPSTREAM_PAYLOADS,
    Bad,
    Features,
    KeyStr,
    SizeValue,
    SpelledFloat,
    SpelledInt,
    Trace,
)
from auxspec.engine.table import TABLE

LONG_KEY = 255  # code points from which a key counts as long (the decoder's LIMIT_LENGTHS start there)
LONG_LIST = 9  # keys or objects from which a list counts as long (past the classic scope's longest)
BIG_OBJECT = 4096  # bytes from which an object is big (where auxstore copies objects one by one)
PAST_INT64 = 2**63


# Codec inputs that decode to every store the codec builds that cannot be
# built (one byte each) and every spelled size (a second byte from 128 on):
# verify's random phase tries them all first, as a draw reaches them rarely.
SIZE_SWEEP: tuple[bytes, ...] = (
    *(bytes([selector]) for selector in range(SPECIAL_SIZES + 8, 256)),
    *(bytes([SPECIAL_SIZES + 8, 128 + index]) for index in range(len(SPELLED_SIZES))),
)


@dataclass(frozen=True)
class InputClass:
    """One class of input: ``group`` (what it is a value of), ``name``,
    ``spec`` (what the spec makes of it under ``strict``: "accepted", or the
    error kind it is refused with), ``upstream`` (whether vLLM accepts it,
    so verify generates it under ``upstream`` too), ``what`` it is and, for
    keys and sizes, how a port behind the process protocol is sent it."""

    group: str
    name: str
    spec: str
    upstream: bool
    what: str
    json: str = ""

    @property
    def label(self) -> str:
        return f"{self.group}: {self.name}"


_A = "accepted"

_KEYS = (
    InputClass("key", "ascii", _A, True, "printable ASCII only", '`"k0"`'),
    InputClass(
        "key", "bmp", _A, True, "a non-ASCII character of the Basic Multilingual Plane", '`"\\u043a"` (escaped)'
    ),
    InputClass("key", "astral", _A, True, "a character past U+FFFF", '`"\\ud83d\\udd11"`: one character'),
    InputClass("key", "surrogate", _A, True, "a lone surrogate (U+D800-U+DFFF alone)", '`"k\\ud800"`: kept as it is'),
    InputClass("key", "nul", _A, True, "a NUL character inside it", '`"k\\u00000"`: the key goes on'),
    InputClass("key", "control", _A, True, "another control character (tab, ESC, DEL, C1)", '`"k\\u001b0\\u007f"`'),
    InputClass("key", "combining", _A, True, "a combining mark (NFD form): not normalised", '`"e\\u0301"`'),
    InputClass("key", "empty", _A, True, "the empty key", '`""`'),
    InputClass("key", "long", _A, True, f"{LONG_KEY} code points or more, up to 65,536", "as any string"),
    InputClass("key", "str subclass", _A, False, "a `str` subclass: taken as its plain value", "as its plain string"),
    InputClass("key", "not a str", "refused: type", False, "an `int` key", "a JSON integer"),
)
_KEY_LISTS = (
    InputClass("key list", "empty", _A, True, "no keys"),
    InputClass("key list", "repeats", _A, True, "a key more than once"),
    InputClass("key list", "long", _A, True, f"{LONG_LIST} keys or more"),
    *(
        InputClass("key list", f"bad: {what}", "refused: type", False, f"a {what} given as the list")
        for what in BAD_LISTS
    ),
)
_BATCHES = (
    InputClass("batch", "empty", _A, True, "no objects"),
    InputClass("batch", "repeats", _A, True, "a key more than once (first position, last payload)"),
    InputClass("batch", "long", _A, True, f"{LONG_LIST} objects or more"),
    InputClass("batch", "no key and payload", "refused: type", False, "an object without `key` and `payload`"),
    *(
        InputClass("batch", f"bad: {what}", "refused: type", False, f"a {what} given as the batch")
        for what in BAD_LISTS
    ),
)
_PAYLOAD_WHAT = {
    "bytes": "the form's own (`bytes`; a `bytearray` changed afterwards; a replaced attribute)",
    "bytearray": "a `bytearray`",
    "view": "a `memoryview` of a `bytes` object",
    "offset": "a `memoryview` slice 3 bytes into a larger buffer",
    "readonly": "a read-only `memoryview` of a `bytearray`",
    "array-H": "`array('H')`: 2-byte items",
    "array-I": "`array('I')`: 4-byte items",
    "array-d": "`array('d')`: 8-byte items",
    "cast-Q": "a `memoryview` cast to `'Q'`: 8-byte items",
    "changed": "a `memoryview` of a `bytearray` the caller overwrites once the call returns",
    "shared": "slices of one `bytearray` behind every object, overwritten once the call returns",
    "strided": "a `memoryview` that is not C-contiguous: taken as its bytes in order",
    "str": "a `str`",
}
_PAYLOADS = (
    *(
        InputClass(
            "payload",
            kind,
            "refused: type" if kind == "str" else _A,
            kind in UPSTREAM_PAYLOADS,
            _PAYLOAD_WHAT[kind],
            "hex, whatever the kind" if kind == "bytes" else "",
        )
        for kind in PAYLOAD_KINDS
    ),
    InputClass("payload", "null", "refused: type", False, "`None`", "`null`"),
    InputClass("payload", "wrong length", "refused: payload", False, "one byte more than `object_nbytes`", "hex"),
)
_BUFFERS = (
    InputClass("buffer", "short", "refused: buffer", True, "fewer bytes than the keys' objects"),
    InputClass("buffer", "exact", _A, True, "exactly the keys' objects"),
    InputClass("buffer", "larger", _A, True, "room to spare: the rest stays as it was"),
    InputClass("buffer", "read-only", "refused: type", False, "a read-only buffer", '`"readonly": true`'),
    *(InputClass("buffer", f"bad: {what}", "refused: type", False, f"a {what} buffer") for what in BAD_BUFFERS),
    *(
        InputClass("buffer shape", shape, _A, True, "the form's own buffer" if shape == "plain" else f"`{shape}`")
        for shape in BUFFER_SHAPES
    ),
)
_FORMS = tuple(
    InputClass(
        "form",
        form,
        _A,
        form not in REENTRANT_FORMS,
        "lists, `BlockObject`s"
        if form == "list"
        else "tuples"
        if form == "tuple"
        else "one-pass generators (under upstream: a put's only)"
        if form == "iter"
        else f"generators that first call `{form.removeprefix('reenter-')}` on the store: that call is refused",
    )
    for form in FORMS
)
_SIZES = (
    InputClass("size", "int", _A, True, "plain `int` sizes", "a JSON integer"),
    InputClass(
        "size", "int subclass", _A, False, "an `int` subclass: taken as its plain value", "as its plain integer"
    ),
    InputClass("size", "remainder", _A, True, "`max_bytes` not a multiple of `object_nbytes`"),
    InputClass("size", "big objects", _A, True, f"objects of {BIG_OBJECT} bytes or more"),
    InputClass("size", "out of range", "refused: config", True, "`object_nbytes <= 0` or `max_bytes < object_nbytes`"),
    InputClass(
        "size",
        "past 2**63",
        "refused: config",
        True,
        "integers past 2**63 and 2**64, `max_bytes < object_nbytes` (not once wrapped to 64 bits)",
        "all digits, taken exactly",
    ),
    InputClass("size", "-0", "refused: config", False, "`object_nbytes` spelled `-0`: the integer 0", "`-0`"),
    InputClass("size", "1E0", "refused: type", False, "spelled `1E0`: a number that is not an integer", "`1E0`"),
    InputClass("size", "4.0", "refused: type", False, "spelled `4.0`: not an integer, whatever its value", "`4.0`"),
    *(
        InputClass("size", name, "refused: type", False, what, json)
        for name, what, json in (
            ("float", "a `float` such as 2.5", "`2.5`"),
            ("str", 'a `str` such as "8"', '`"8"`'),
            ("null", "`None`", "`null`"),
            ("bool", "`True`", "`true`"),
        )
    ),
)
CLASSES: tuple[InputClass, ...] = (*_SIZES, *_KEYS, *_KEY_LISTS, *_BATCHES, *_PAYLOADS, *_BUFFERS, *_FORMS)
GROUPS = tuple(dict.fromkeys(c.group for c in CLASSES))

# Which field kinds of the op table each group's values stand in.
_GROUP_KINDS: dict[str, tuple[type, ...]] = {
    "size": (),
    "key": (Key, Keys, Batch),
    "key list": (Keys,),
    "batch": (Batch,),
    "payload": (Batch, Payloads),
    "buffer": (Buffer, Flag),
    "buffer shape": (Shape,),
    "form": (Form,),
}


def arguments(group: str) -> list[str]:
    """The op arguments (``op field``) whose values fall in ``group``, from the op table."""
    if group == "size":
        return ["store max_bytes", "store object_nbytes"]
    kinds = _GROUP_KINDS[group]
    return [f"{row.name} {f.name}" for row in TABLE for f in row.fields if isinstance(f.kind, kinds)]


# ---------------------------------------------------------------- classify


@lru_cache(maxsize=4096)
def _plain_key_classes(key: str) -> tuple[str, ...]:
    if not key:
        return ("empty",)
    found = []
    points = [ord(ch) for ch in key]
    if all(0x20 <= p < 0x7F for p in points):
        found.append("ascii")
    if any(0x80 <= p <= 0xFFFF and not 0xD800 <= p <= 0xDFFF for p in points):
        found.append("bmp")
    if any(p > 0xFFFF for p in points):
        found.append("astral")
    if any(0xD800 <= p <= 0xDFFF for p in points):
        found.append("surrogate")
    if 0 in points:
        found.append("nul")
    if any(0 < p < 0x20 or 0x7F <= p < 0xA0 for p in points):
        found.append("control")
    if any(unicodedata.combining(ch) for ch in key if ord(ch) >= 0x300):
        found.append("combining")
    if len(key) >= LONG_KEY:
        found.append("long")
    return tuple(found)


def key_classes(key: object) -> tuple[str, ...]:
    """The key classes ``key`` is in (several at once: "ascii" and "long")."""
    if not isinstance(key, str):
        return ("not a str",)
    found = _plain_key_classes(str.__str__(key))
    return (*found, "str subclass") if type(key) is not str else found


def size_classes(max_bytes: SizeValue, object_nbytes: SizeValue) -> list[str]:
    """The size classes of a store's two sizes."""
    found = []
    sizes = (max_bytes, object_nbytes)
    for size in sizes:
        if isinstance(size, (SpelledInt, SpelledFloat)):
            found.append(size.json)
        elif type(size) is bool:
            found.append("bool")
        elif isinstance(size, int):
            found.append("past 2**63" if size >= PAST_INT64 else "int subclass" if type(size) is not int else "int")
        else:
            found.append({float: "float", str: "str"}.get(type(size), "null"))
    if all(type(size) in (int, SpelledInt) for size in sizes):  # exact types: a bool is no size
        most, each = int(max_bytes), int(object_nbytes)  # type: ignore[arg-type]
        if each <= 0 or most < each:
            found.append("out of range")
        else:
            found += ["remainder"] * bool(most % each) + ["big objects"] * (each >= BIG_OBJECT)
    return found


def _hashable(key: object) -> object:
    return str.__str__(key) if isinstance(key, str) else key


def _key_labels(key: object) -> tuple[str, ...]:
    return tuple("key: " + name for name in key_classes(key))


class TraceKeys(NamedTuple):
    """What ``Domain.trace`` finds of a trace's keys."""

    distinct: int  # distinct keys (by value) passed in any op
    longest: int  # the longest key list or batch


class Domain:
    """How many values of each class the traces recorded held (``counts``,
    by ``InputClass.label``)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._keys_seen: list[object] = []  # every key the trace being classified passed, in order
        self._longest = 0  # and its longest key list or batch so far

    def trace(self, trace: Trace) -> TraceKeys:
        """Count the classes of ``trace``'s values; its distinct keys and
        longest key list or batch (the scope report's figures)."""
        counts = self.counts
        for name in size_classes(trace.max_bytes, trace.object_nbytes):
            counts["size: " + name] += 1
        nbytes = trace.object_nbytes if type(trace.object_nbytes) is int else None
        self._keys_seen, self._longest = [], 0
        for op in trace.ops:
            for name, read in _FIELDS[type(op)]:
                read(self, getattr(op, name), op, nbytes)
        return TraceKeys(self._count_keys(self._keys_seen), self._longest)

    # One method per field kind (``_READS`` picks it by the kind's type): a
    # trace's every field is classified, so the dispatch is one lookup.
    def _key(self, value: Any, op: Any, nbytes: int | None) -> None:
        self._keys_seen.append(value)

    def _key_list(self, value: Any, op: Any, nbytes: int | None) -> None:
        if isinstance(value, Bad):
            self.counts[f"key list: bad: {value.what}"] += 1
            return
        self._keys_seen.extend(value)
        self._list("key list: ", value, value)

    def _payloads(self, value: Any, op: Any, nbytes: int | None) -> None:
        if not isinstance(op.objects, Bad) and any(not isinstance(o, Bad) and o[1] is not None for o in op.objects):
            self.counts["payload: " + value] += 1

    def _flag(self, value: Any, op: Any, nbytes: int | None) -> None:
        self.counts["buffer: read-only"] += bool(value)

    def _shape(self, value: Any, op: Any, nbytes: int | None) -> None:
        self.counts["buffer shape: " + value] += 1

    def _form(self, value: Any, op: Any, nbytes: int | None) -> None:
        self.counts["form: " + value] += 1

    def _count_keys(self, keys: list[object]) -> int:
        """Count the key classes of ``keys`` (each key as often as it was
        passed); the number of distinct keys. Equal keys are classified once:
        a trace passes a few keys many times over."""
        counts = self.counts
        types = set(map(type, keys))
        if len(types - {int}) > 1 or not types <= {int, str, KeyStr}:
            for key in keys:  # a str and a str subclass of one value, or odd keys: one by one
                for label in _key_labels(key):
                    counts[label] += 1
            return len(set(map(_hashable, keys)))
        tally = Counter(keys)  # keys equal as values, and of one str type: one class
        for key, times in tally.items():
            for label in _key_labels(key):
                counts[label] += times
        return len(tally)

    def _batch(self, objects: Any, op: Any, nbytes: int | None) -> None:
        counts = self.counts
        if isinstance(objects, Bad):
            counts[f"batch: bad: {objects.what}"] += 1
            return
        keys = []
        for obj in objects:
            if isinstance(obj, Bad):
                counts["batch: no key and payload"] += 1
                continue
            keys.append(obj[0])
            if obj[1] is None:
                counts["payload: null"] += 1
            elif nbytes is not None and len(obj[1]) != nbytes:
                counts["payload: wrong length"] += 1
        self._keys_seen.extend(keys)
        self._list("batch: ", objects, keys)

    def _list(self, group: str, values: Any, keys: list[object]) -> None:
        """A key list's or batch's own classes: empty, long, with a key repeated."""
        count = len(values)
        self._longest = max(self._longest, count)
        if not count:
            self.counts[group + "empty"] += 1
        elif count >= LONG_LIST:
            self.counts[group + "long"] += 1
        if len(set(keys)) < len(keys):  # a str subclass hashes and compares as its value
            self.counts[group + "repeats"] += 1

    def _buffer(self, buffer: Any, op: Any, nbytes: int | None) -> None:
        if isinstance(buffer, Bad):
            self.counts[f"buffer: bad: {buffer.what}"] += 1
            return
        if nbytes is None or isinstance(op.keys, Bad):
            return
        wanted = len(op.keys) * nbytes
        self.counts["buffer: " + ("short" if buffer < wanted else "exact" if buffer == wanted else "larger")] += 1

    # ------------------------------------------------------------- report

    def missing(self, profile: str, features: Features = ALL) -> list[InputClass]:
        """The classes verify generates for ``profile`` and a target of
        ``features`` that no trace recorded held."""
        return [c for c in expected(profile, features) if not self.counts[c.label]]

    def line(self, profile: str, features: Features = ALL, width: int = 160) -> str:
        """The scope report's ``domain:`` line: how many of the classes
        generated here were reached, and the first of those that were not
        (each class's count is in the JSON report, ``as_json``)."""
        wanted = expected(profile, features)
        missing = [c.label for c in wanted if not self.counts[c.label]]
        line = f"domain: {len(wanted) - len(missing)} of {len(wanted)} input classes reached"
        if not missing:
            return line + " (the count of each: --json, scope.domain)"
        line += "; not reached: "
        for index, label in enumerate(missing):
            more = f" and {len(missing) - index} more"
            if len(line) + len(label) + 2 + len(more) > width:
                return line.removesuffix(", ") + more
            line += label + ", "
        return line.removesuffix(", ")

    def as_json(self) -> dict[str, int]:
        return {c.label: self.counts[c.label] for c in CLASSES}


_READS: dict[type, Callable[[Domain, Any, Any, int | None], None]] = {
    Key: Domain._key,
    Keys: Domain._key_list,
    Batch: Domain._batch,
    Payloads: Domain._payloads,
    Buffer: Domain._buffer,
    Flag: Domain._flag,
    Shape: Domain._shape,
    Form: Domain._form,
}
# Each op type's fields that hold a class of value: the field's name and its kind's reader.
_FIELDS: dict[type, tuple[tuple[str, Callable[[Domain, Any, Any, int | None], None]], ...]] = {
    row.cls: tuple((f.name, _READS[type(f.kind)]) for f in row.fields if type(f.kind) in _READS) for row in TABLE
}


def expected(profile: str, features: Features = ALL) -> list[InputClass]:
    """The classes verify generates for ``profile`` and a target offering
    ``features``: under ``upstream`` only what vLLM accepts; read buffers
    only for a target with ``read_into``; for a port behind the protocol
    (no ``PYTHON`` feature) only what plain JSON values carry."""
    return [
        c
        for c in CLASSES
        if (profile == "strict" or c.upstream)
        and (PYTHON in features or _over_json(c))
        and (READ_INTO in features or c.group not in ("buffer", "buffer shape"))
    ]


_PYTHON_ONLY = {"str subclass", "int subclass", "no key and payload"}


def _over_json(c: InputClass) -> bool:
    if c.group in ("buffer shape", "form"):
        return c.name in ("plain", "list")
    if c.group == "payload":
        return c.name in ("bytes", "null", "wrong length")
    return c.name not in _PYTHON_ONLY and not c.name.startswith("bad: ")


# ---------------------------------------------------------------- the docs


def markdown() -> str:
    """The domain table as docs/input-domain.md shows it, generated from ``CLASSES``."""
    out: list[str] = []
    for group in GROUPS:
        shown = ", ".join(f"`{a}`" for a in arguments(group))
        out += [f"### {group}", "", f"Values of: {shown}.", ""]
        out += ["| class | strict | upstream | what it is | sent to a port as |", "| --- | --- | --- | --- | --- |"]
        for c in CLASSES:
            if c.group == group:
                upstream = "generated" if c.upstream else "never generated"
                out.append(f"| `{c.name}` | {c.spec} | {upstream} | {c.what} | {c.json or ''} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
