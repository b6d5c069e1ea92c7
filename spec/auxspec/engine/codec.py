"""The byte codec: fuzzer bytes to traces (``decode``) and back (``encode``).

Both directions work from the op table (``auxspec.engine.table``) and the
field kinds (``auxspec.engine.fields``), never from op types: an op byte's
low five bits pick a row by its ``slots`` (rows of one ``group`` share their
slots and one more byte picks among them), its top three bits the form, and
each field of the row then reads its bytes by kind.

Any input decodes (past its end every byte reads as 0), and a shorter input
is a shorter trace, so libFuzzer's and Hypothesis's shrinking both work on
traces.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cache, partial
from operator import length_hint
from typing import Any

from auxspec.engine.fields import Batch, Buffer, Flag, Form, Key, Keys, Payloads, Shape, payloads_fit
from auxspec.engine.ops import (
    ALL,
    BAD_BUFFERS,
    BAD_LISTS,
    BAD_OBJECT,
    BUFFER_SHAPES,
    FORMS,
    PAYLOAD_KINDS,
    PYTHON,
    REENTRANT_FORMS,
    SHAPE_UNIT,
    UNDEFINED,
    UPSTREAM_PAYLOADS,
    Bad,
    Features,
    KeyStr,
    KeyValue,
    Op,
    PayloadValue,
    SizeInt,
    SizeValue,
    Trace,
    spelled,
)
from auxspec.engine.table import BY_NAME, TABLE, OpKind, kind_of


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
# Stores that cannot be built either, in the number forms docs/protocol.md
# gives a rule for (a port is sent each as spelled): integers past 2**63
# and 2**64 (max_bytes below object_nbytes: a port that keeps sizes in 64
# bits, wrapping, builds a store), -0 (the integer 0); then, under strict
# only, 1E0 and 4.0 (not integers, whatever their value).
SPELLED_SIZES: tuple[tuple[SizeValue, SizeValue], ...] = (
    (2**64 + 16, 2**65 + 8),
    (2**63 + 2, 2**63 + 3),
    (8, spelled("-0")),
    (8, spelled("1E0")),
    (spelled("4.0"), 2),
)
_SPELLED_VALID = 2  # plain ints, defined under upstream too (a size of an int subclass is strict only)

# What the low five bits of an op byte pick: a row, or a group of rows.
_SLOTS: list[tuple[OpKind, ...]] = []
_FIRST_SLOT: dict[str, int] = {}  # row name -> its (group's) first slot
for _row in TABLE:
    if _row.group and _row.slots == 0:
        _FIRST_SLOT[_row.name] = _FIRST_SLOT[next(r.name for r in TABLE if r.group == _row.group)]
        continue
    _FIRST_SLOT[_row.name] = len(_SLOTS)
    members = tuple(r for r in TABLE if r.group == _row.group) if _row.group else (_row,)
    _SLOTS.extend([members] * _row.slots)
assert len(_SLOTS) == 32, "the rows' slots must cover an op byte's five low bits"
assert all(tuple(f.name for f in row.fields) == tuple(f.name for f in fields(row.cls)) for row in TABLE)
_GET = BY_NAME["get"]  # what a slot decodes as when the target lacks its feature
_DEFAULTS = {row.name: {f.name: f.default for f in fields(row.cls)} for row in TABLE}
_FORM_BITS = {"list": 0, "tuple": 6 << 5, "iter": 7 << 5}


@dataclass
class _Reading:
    """What the field readers of one trace share."""

    src: _Bytes
    object_nbytes: int
    invalid: bool  # invalid values may be made
    python: bool  # Bad shapes may be made
    names: tuple[KeyValue, ...]
    shape: int = 0  # read_into's buffer shape byte, which the read-only flag reads too
    keys: Any = ()  # the last key list read (a buffer's size follows it)
    scale: int = 1  # lists read up to scale x their kind's most
    pattern: int = 0  # payload bytes: 0 a fill byte repeated, 1 all 256 values from it, 2 sparse
    larger: bool = False  # scaled: read_into buffers may be larger than the bytes read, and of any shape
    buffer_shape: str = "plain"  # the last buffer's shape (ops.BUFFER_SHAPES)
    retained: list[KeyValue] = field(default_factory=list)  # scaled: retained since the last echo
    iter_form: str = "iter"  # what the iter form stands for: "iter" or one of REENTRANT_FORMS
    payload_kinds: tuple[str, ...] = ()  # scaled, Python targets: the kinds a put's payloads may be
    payloads: str = "bytes"  # the last batch's payload kind (ops.PAYLOAD_KINDS)


def decode(data: bytes, profile: str = "strict", features: Features = ALL) -> Trace:
    """The trace that ``data`` stands for, using only ops ``features`` allow.

    The first byte picks the scope. Below ``SCALED`` (the classic scope),
    short inputs reach the interesting small states: capacities of 1-4
    (capacity 1 is the likeliest), keys from a pool of six, frequent retains
    so stores fill with pinned keys, and under ``strict`` occasional invalid
    values. From ``SCALED`` on, a header draws a swarm configuration
    (Groce et al., ISSTA 2012): sizes log-uniformly across scales (capacity,
    object size, key pool), a key style, a payload pattern, which op kinds are
    on, how long key lists may be and whether ops come in runs (``_scaled``).
    Now and then objects are big (``BIG`` bytes) or the store cannot be built.
    """
    src = _Bytes(data)
    invalid = profile == "strict" or UNDEFINED in features
    python = PYTHON in features
    selector = src.next()
    if selector >= SPECIAL_SIZES + 8:
        sizes = (BAD_SIZES + NON_INT_SIZES)[selector % 8] if invalid else BAD_SIZES[selector % 4]
        spelling = src.next()  # nothing followed a store that cannot be built: this byte changes no other trace
        if spelling >= 128:
            table = SPELLED_SIZES if invalid else SPELLED_SIZES[:_SPELLED_VALID]
            sizes = table[spelling % len(table)]
        return Trace(profile, sizes[0], sizes[1])
    if SCALED <= selector < SPECIAL_SIZES:
        return _scaled(src, selector, profile, features, invalid, python)
    object_nbytes = BIG if selector >= SPECIAL_SIZES else 1 + selector % 4
    capacity = 1 + (src.next() % 8) // 2 if src.more() else 1
    max_bytes = capacity * object_nbytes + src.next() % min(object_nbytes, 4)  # a remainder is allowed
    reading = _Reading(src, object_nbytes, invalid, python, _KEYS_OR_INVALID if invalid else _KEYS)
    ops = _read_ops(reading, profile, features, _CLASSIC, MAX_OPS, runs=False)
    return Trace(profile, max_bytes, object_nbytes, tuple(ops))


# A slot: a row, and the fields left at their defaults (a put of pins only, say).
_Slot = tuple[OpKind, frozenset[str]]
_CLASSIC: list[tuple[_Slot, ...]] = [tuple((row, frozenset()) for row in members) for members in _SLOTS]


def _read_ops(
    r: _Reading, profile: str, features: Features, slots: list[tuple[_Slot, ...]], most: int, runs: bool
) -> list[Op]:
    ops: list[Op] = []
    src = r.src
    if not features >= _OPTIONAL:  # the rows the target lacks leave their slots' groups
        slots = [_allowed(members, features) for members in slots]
    while src.more() and len(ops) < most:
        byte = src.next()
        members = slots[byte % len(slots)]
        # The top three bits choose the form: mostly plain lists.
        form = FORMS[max(byte >> 5, 5) - 5] if r.python else "list"
        if form == "iter":
            form = r.iter_form
        row, skip = members[0] if len(members) == 1 else members[src.next() % len(members)]
        if form == "iter" and not row.one_pass_upstream and profile != "strict":
            form = "tuple"  # vLLM reads a key list twice: a one-pass iterator is not the list[str] it takes
        repeat = 1
        if runs:
            run = src.next()
            repeat = 1 + (run >> 3) if run % 8 == 0 else 1  # now and then a run of up to 32 of this kind
        for _ in range(min(repeat, most - len(ops))):
            # Positionally: a row's fields are its dataclass's, in order (checked below).
            ops.append(
                row.cls(
                    *[
                        form
                        if isinstance(f.kind, Form)
                        else _DEFAULTS[row.name][f.name]
                        if f.name in skip
                        else _READERS[type(f.kind)](f.kind, r)
                        for f in row.fields
                    ]
                )
            )
    return ops


_OPTIONAL = frozenset(row.feature for row in TABLE if row.feature is not None)


def _allowed(members: tuple[_Slot, ...], features: Features) -> tuple[_Slot, ...]:
    """The members of a slot that ``features`` allow; a ``get`` when none is."""
    kept = tuple(member for member in members if member[0].feature is None or member[0].feature in features)
    return kept or ((_GET, frozenset()),)


# --------------------------------------------------------------- the scaled scope

SCALED = 192  # first-byte values from here to SPECIAL_SIZES: the scaled scope
MAX_SCALED_OPS = 256
MOST_SLOTS = 96
MOST_NBYTES = 12 * 1024
MOST_SCALE = 8  # the longest lists of the scaled scope: eight times the classic lengths
READ_SCALE = 4  # and a read's keys, in such a trace, four times that again (up to 128 for get_concatenated)
# The largest read buffer decoded: traces.MAX_BUFFER (what a trace file and
# the port protocol take; codec may not import traces), a multiple of every
# buffer shape's item size.
MOST_BUFFER = (1 << 20) // 8 * 8
KEY_STYLES = ("short", "long", "non-ascii", "look-alike", "spaced", "mixed")
# Key lengths (code points) where a port's fixed-size field or hash buffer
# would end: the "long" style's every third key has one of them.
LIMIT_LENGTHS = (255, 256, 257, 1024, 4097, 65536)
_ALL_BYTES = bytes(range(256)) * 2


def _log_scale(byte: int, most: int) -> int:
    """1 to ``most``, log-uniform in ``byte``: every scale is as likely as the next."""
    scaled: float = math.exp(math.log(most) * byte / 255)
    return max(1, round(scaled))


def _scaled(src: _Bytes, selector: int, profile: str, features: Features, invalid: bool, python: bool) -> Trace:
    """The scaled scope: a swarm configuration, then ops.

    Header bytes: capacity (1-96), object size (1 B to 12 KiB), the remainder
    of ``max_bytes`` (any, so it is rarely a multiple), the key pool (1 to four
    times the capacity, at most 255 keys), the key style and payload pattern
    (and, under ``strict`` for a Python target, in the same byte's top bits:
    whether the sizes are an ``int`` subclass (``SizeInt``), whether the
    one-pass generators of this trace call back into the store
    (``REENTRANT_FORMS``), and whether its keys are a ``str`` subclass
    (``KeyStr``: every str key of its key table, so every op that carries
    keys passes them; the invalid int key stays an int); none reads a byte
    more, so inputs decode to the same ops as before these were added, up to
    the size's and the key's type and the form's name),
    and the swarm mask: which of get, read_into, the observations, close, puts
    of pins only and puts of releases only are on, whether ops come in runs,
    and how long key lists may be (up to eight times the classic lengths, so
    counts climb well past 2 and come back down, and one put may end many
    counts at once; at eight, a read's keys up to four times that again).
    """
    capacity = _log_scale(src.next(), MOST_SLOTS)
    object_nbytes = _log_scale(src.next(), MOST_NBYTES)
    max_bytes = capacity * object_nbytes + src.next() % object_nbytes
    pool = _log_scale(src.next(), min(255, 4 * capacity + 2))
    style = src.next()
    mask = src.next() | (selector & 1) << 8  # the selector's low bit: runs
    # What only a Python caller of the strict store may pass: 0-14, the style
    # byte's bits above style and pattern (0 for any other target).
    extra = style // (3 * len(KEY_STYLES)) if python and profile == "strict" else 0
    names = _key_table(KEY_STYLES[style % len(KEY_STYLES)], pool, invalid, key_str=bool(extra // 8 % 2))
    reading = _Reading(src, object_nbytes, invalid, python, names)
    reading.scale = 1 << (mask >> 6 & 3)  # lists up to 1, 2, 4 or 8 times the classic lengths
    reading.pattern = style // len(KEY_STYLES) % 3
    reading.larger = True
    if python:
        allowed = PAYLOAD_KINDS if profile == "strict" else UPSTREAM_PAYLOADS
        reading.payload_kinds = tuple(kind for kind in allowed if payloads_fit(object_nbytes, kind))
    sizes: tuple[int, int] = (max_bytes, object_nbytes)
    if extra % 2:
        sizes = (SizeInt(max_bytes), SizeInt(object_nbytes))
    reenter = extra // 2 % 4
    if reenter:
        reading.iter_form = REENTRANT_FORMS[reenter - 1]
    ops = _read_ops(reading, profile, features, _swarm(mask & 63), MAX_SCALED_OPS, runs=bool(mask >> 8))
    return Trace(profile, sizes[0], sizes[1], tuple(ops))


_PUT = BY_NAME["put"]
_PINS_ONLY = frozenset({"objects", "release"})
_RELEASES_ONLY = frozenset({"objects", "retain"})


@cache
def _swarm(mask: int) -> list[tuple[_Slot, ...]]:
    """The slots of a swarm mask: puts always, the rest as its bits say."""
    slots: list[tuple[_Slot, ...]] = [((_PUT, frozenset()),)] * 8
    choices = [
        (1, 3, (("get",),)),
        (2, 2, (("read_into",),)),
        (4, 1, (("flush", "len", "contains", "stats", "enter", "exit"),)),
        (8, 1, (("close",),)),
    ]
    for bit, weight, (names,) in choices:
        if mask & bit:
            slots += [tuple((BY_NAME[name], frozenset()) for name in names)] * weight
    if mask & 16:
        slots += [((_PUT, _PINS_ONLY),)] * 3
    if mask & 32:
        slots += [((_PUT, _RELEASES_ONLY),)] * 3
    return slots


@cache
def _key_table(style: str, pool: int, invalid: bool, key_str: bool = False) -> tuple[KeyValue, ...]:
    """The key each byte stands for: ``pool`` keys of ``style`` (each a
    ``KeyStr`` when ``key_str``), 255 the non-str key 1 when invalid values
    may be made."""
    keys: list[str] = [_key_of(style, index) for index in range(pool)]
    if key_str:
        keys = [KeyStr(key) for key in keys]
    table: list[KeyValue] = [keys[byte % pool] for byte in range(256)]
    if invalid:
        table[255] = 1
    return tuple(table)


def _key_of(style: str, index: int) -> str:
    if style == "mixed":
        style = KEY_STYLES[index % (len(KEY_STYLES) - 1)]
    if style == "long":
        if index % 3 == 2:  # a length at a power of two or one off it; only the end tells them apart
            length, tail = LIMIT_LENGTHS[index // 3 % len(LIMIT_LENGTHS)], f"/{index}"
            return "x" * (length - len(tail)) + tail
        return "aux/" + "layer-0/" * 24 + f"block-{index:04d}"  # long, sharing a long prefix
    if style == "non-ascii":
        # Mixed; then pairs that differ only in an astral character, only in
        # a lone surrogate (as JSON's "\ud800" gives one), BMP only.
        pair, other = index // 8, index // 4 % 2
        return (
            f"ключ-{index}-é🔑",
            f"{chr(0x1F511 + other)}{pair}\U00010348",
            f"k{pair}" + ("\ud800", "\udfff")[other],
            f"鍵{index}",
        )[index % 4]
    if style == "look-alike":  # pairs that look the same: NFC and NFD, a zero-width joiner
        return ("\u00e9" if index % 2 else "e\u0301") + ("\u200d" * (index // 2 % 2)) + str(index // 4)
    if style == "spaced":  # the empty key, keys that differ only in white space, NUL and control characters
        if index % 5 == 4:  # pairs that differ only in their control characters, NUL in one
            return f"k\x00{index // 10}" if index // 5 % 2 else f"k\x1b{index // 10}\x7f"
        return "" if index == 0 else " " * (index % 3) + f"k{index // 3}" + "\t" * (index // 3 % 2)
    return f"k{index}"


def _payload(r: _Reading, fill: int) -> bytes:
    """``object_nbytes`` bytes from ``fill`` in the reading's pattern."""
    n = r.object_nbytes
    if r.pattern == 1:  # every byte value, starting at fill
        run = _ALL_BYTES[fill : fill + 256]
        return (run * (n // 256 + 1))[:n]
    if r.pattern == 2 and n > 1:  # zeros, with fill at the ends
        return bytes([fill]) + bytes(n - 2) + bytes([fill ^ 0xFF])
    return bytes([fill]) * n


def _read_key(kind: Key, r: _Reading) -> KeyValue:
    return r.names[r.src.next()]


def _read_keys(kind: Keys, r: _Reading) -> Any:
    byte = r.src.next()
    if byte >= 250 and r.invalid and r.python:  # a count byte of 250 and up: a list of the wrong shape
        r.keys = Bad(BAD_LISTS[(byte - 250) % len(BAD_LISTS)])
    elif r.scale > 1 and kind.role == "release" and byte % 16 == 15 and r.retained:
        # Scaled: release what was retained since the last such release, so
        # many counts return to zero in one put (0 -> 1 -> 0, many keys at once).
        r.keys, r.retained = tuple(r.retained), []
    else:
        names, read = r.names, r.src.next
        most = kind.most * r.scale
        if r.scale == MOST_SCALE and not kind.role:  # reads of up to 128 keys: callers read many blocks at once
            most *= READ_SCALE
        r.keys = tuple([names[read()] for _ in range(byte % (most + 1))])
        if r.scale > 1 and kind.role == "retain":
            r.retained.extend(r.keys)
    return r.keys


def _read_batch(kind: Batch, r: _Reading) -> Any:
    byte = r.src.next()
    if byte >= 250 and r.invalid and r.python:
        return Bad(BAD_LISTS[(byte - 250) % len(BAD_LISTS)])
    found: list[Any] = []
    names, read = r.names, r.src.next
    most = kind.most * r.scale
    if r.payload_kinds:
        # Scaled, Python targets: the count byte's quotient (no byte more read)
        # picks the payloads' kind, plain bytes half the time.
        quotient = byte // (most + 1)
        r.payloads = r.payload_kinds[(quotient // 2) % len(r.payload_kinds)] if quotient % 2 else "bytes"
    for _ in range(byte % (most + 1)):
        key_byte = read()
        if key_byte == 254 and r.invalid and r.python:
            found.append(Bad(BAD_OBJECT))
            continue
        fill = read()
        if r.larger and fill % 16 == 0:
            data = bytes(r.object_nbytes)  # scaled: one object in 16 all zeros (a zero page), in every pattern
        else:
            data = bytes([fill]) * r.object_nbytes if r.pattern == 0 else _payload(r, fill)
        payload: PayloadValue = data
        if fill >= 253 and r.invalid:
            payload = None if fill == 253 else data + data[:1]  # wrong type, wrong length
        found.append((names[key_byte], payload))
    return tuple(found)


def _read_buffer(kind: Buffer, r: _Reading) -> int | Bad:
    count = 1 if isinstance(r.keys, Bad) else len(r.keys)
    byte = r.src.next()
    exact = count * r.object_nbytes
    short = byte % 4 == 0
    size = exact - short
    if r.larger and byte % 4 == 3:  # room to spare: up to three objects more
        size += r.object_nbytes * (1 + (byte >> 2) % 3)
    shape_byte = r.src.next()
    r.shape = shape_byte % 16
    r.buffer_shape = "plain"
    if r.invalid and r.python and r.shape in (1, 2):
        return Bad(BAD_BUFFERS[r.shape - 1])
    if r.larger and r.python:
        # Scaled: the shape byte's top four bits pick the kind of buffer
        # (plain, subclass and offset twice as often as the others), its size rounded to whole
        # items: down when the buffer is to be short, else up (room to spare).
        shape = _SHAPE_BY_NIBBLE[shape_byte >> 4]
        unit = SHAPE_UNIT.get(shape, 1)
        r.buffer_shape = shape
        if unit > 1 and size > 0:
            size = size // unit * unit if short else -(-size // unit) * unit
    # No more than a trace file and the port protocol allow (a read of many big
    # objects then gets a buffer too small for them, which the spec defines).
    return min(max(size, 0), MOST_BUFFER)


_SHAPE_BY_NIBBLE = tuple(BUFFER_SHAPES[index % len(BUFFER_SHAPES)] for index in range(16))


def _read_payloads(kind: Payloads, r: _Reading) -> str:
    payloads, r.payloads = r.payloads, "bytes"  # the batch's count byte said it; a put without a batch: bytes
    return payloads


def _read_flag(kind: Flag, r: _Reading) -> bool:
    return r.invalid and r.shape == 0  # the buffer's shape byte says read-only


def _read_shape(kind: Shape, r: _Reading) -> str:
    return r.buffer_shape  # the buffer's shape byte says it too


_READERS: dict[type, Callable[[Any, _Reading], Any]] = {
    Key: _read_key,
    Keys: _read_keys,
    Batch: _read_batch,
    Buffer: _read_buffer,
    Flag: _read_flag,
    Shape: _read_shape,
    Payloads: _read_payloads,
}


# ------------------------------------------------------------------ encoding


def encode(trace: Trace) -> bytes | None:
    """Bytes that ``decode`` (with every feature) turns into ``trace`` up to
    renaming: keys become the pool's ``k0``..``k5`` in order of first use,
    any int key becomes ``1``, a payload becomes its first byte repeated.
    None when ``trace`` is outside the alphabet (sizes other than what
    ``decode`` builds, more than six keys, more than ``MAX_OPS`` ops, or a
    list longer than ``decode`` reads).

    The inverse of the decoder, not a second one: seeds for the store harness
    are made from the conformance vectors with it, and ``decode(encode(t))``
    is checked by the tests.
    """
    strict = trace.profile == "strict"
    try:
        out = bytearray(_encode_sizes(trace, strict))
        if out[0] >= SPECIAL_SIZES + 8:
            return bytes(out) if not trace.ops else None
        nbytes = trace.object_nbytes
        assert isinstance(nbytes, int)
        writing = _Writing(out, nbytes, strict)
        for op in trace.ops:
            _encode_op(op, writing)
    except _Unencodable:
        return None
    return bytes(out)


class _Unencodable(Exception):
    pass


def _want(cond: bool) -> None:
    if not cond:
        raise _Unencodable


def _same(a: SizeValue, b: SizeValue) -> bool:
    return type(a) is type(b) and a == b  # True is not 1 here


def _encode_sizes(trace: Trace, strict: bool) -> bytes:
    sizes = (trace.max_bytes, trace.object_nbytes)
    table = BAD_SIZES + NON_INT_SIZES if strict else BAD_SIZES
    for index, (max_bytes, nbytes) in enumerate(table):
        if _same(max_bytes, sizes[0]) and _same(nbytes, sizes[1]):
            return bytes([SPECIAL_SIZES + 8 + index])
    _want(all(type(size) is int for size in sizes))
    max_bytes, nbytes = int(trace.max_bytes), int(trace.object_nbytes)  # type: ignore[arg-type]
    _want((1 <= nbytes <= 4 or nbytes == BIG) and 1 <= max_bytes // nbytes <= 4 and len(trace.ops) <= MAX_OPS)
    capacity, remainder = divmod(max_bytes, nbytes)
    _want(remainder < min(nbytes, 4))
    return bytes([SPECIAL_SIZES if nbytes == BIG else nbytes - 1, 2 * (capacity - 1), remainder])


@dataclass
class _Writing:
    out: bytearray
    object_nbytes: int
    strict: bool
    names: dict[str, int] = field(default_factory=dict)


def _encode_op(op: Op, w: _Writing) -> None:
    row = kind_of(op)
    form = getattr(op, "form", "list")
    _want(form in _FORM_BITS and (w.strict or row.one_pass_upstream or form != "iter"))
    w.out.append(_FIRST_SLOT[row.name] | _FORM_BITS[form])
    if row.group:
        w.out.append([r for r in TABLE if r.group == row.group].index(row))
    for f in row.fields:
        if not isinstance(f.kind, Form):
            _WRITERS[type(f.kind)](f.kind, getattr(op, f.name), op, w)


def _write_key(kind: Key, value: KeyValue, op: Any, w: _Writing) -> None:
    if not isinstance(value, str):
        _want(w.strict)
        w.out.append(255)
        return
    if value not in w.names:
        _want(len(w.names) < KEY_POOL)
        w.names[value] = len(w.names)
    w.out.append(w.names[value])


def _write_keys(kind: Keys, values: Any, op: Any, w: _Writing) -> None:
    if isinstance(values, Bad):
        _want(w.strict)
        w.out.append(250 + BAD_LISTS.index(values.what))
        return
    _want(len(values) <= kind.most)
    w.out.append(len(values))
    for value in values:
        _write_key(Key(), value, op, w)


def _write_batch(kind: Batch, objects: Any, op: Any, w: _Writing) -> None:
    if isinstance(objects, Bad):
        _want(w.strict)
        w.out.append(250 + BAD_LISTS.index(objects.what))
        return
    _want(len(objects) <= kind.most)
    w.out.append(len(objects))
    for obj in objects:
        if isinstance(obj, Bad):
            _want(w.strict)
            w.out.append(254)
            continue
        _write_key(Key(), obj[0], op, w)
        w.out.append(_fill(obj[1], w.object_nbytes, w.strict))


def _fill(payload: PayloadValue, nbytes: int, strict: bool) -> int:
    if payload is None:
        _want(strict)
        return 253
    if len(payload) != nbytes:
        _want(strict and len(payload) == nbytes + 1)
        return 254
    first = payload[0]
    return first ^ 0x80 if strict and first in (253, 254) else first  # keep it a valid payload


def _write_buffer(kind: Buffer, buffer: Any, op: Any, w: _Writing) -> None:
    exact = (1 if isinstance(op.keys, Bad) else len(op.keys)) * w.object_nbytes
    if isinstance(buffer, Bad):
        _want(w.strict and not op.readonly)
        w.out.extend((1, 1 + BAD_BUFFERS.index(buffer.what)))
    else:
        _want(buffer in (exact, max(exact - 1, 0)) and (w.strict or not op.readonly))
        w.out.append(1 if buffer == exact and exact else 0)
        w.out.append(0 if op.readonly else 3)


def _write_flag(kind: Flag, value: bool, op: Any, w: _Writing) -> None:
    """Nothing: the buffer's shape byte holds it."""


def _write_shape(kind: Shape, value: str, op: Any, w: _Writing) -> None:
    _want(value == "plain")  # the classic scope passes only the form's buffer


def _write_payloads(kind: Payloads, value: str, op: Any, w: _Writing) -> None:
    _want(value == "bytes")  # the classic scope passes only the form's payloads


_WRITERS: dict[type, Callable[[Any, Any, Any, _Writing], None]] = {
    Key: _write_key,
    Keys: _write_keys,
    Batch: _write_batch,
    Buffer: _write_buffer,
    Flag: _write_flag,
    Shape: _write_shape,
    Payloads: _write_payloads,
}
