"""The named conformance vectors: one small trace per rule of the semantics.

``auxspec vectors --generate`` writes them (with the spec's expectations) to
``spec/auxspec/vectors/``; ``auxspec vectors --check`` proves the files still
match the spec and measures how much of the model they cover.
"""

from __future__ import annotations

from auxspec.engine.codec import BIG
from auxspec.engine.ops import (
    Bad,
    Close,
    Contains,
    Enter,
    Exit,
    Flush,
    Get,
    Len,
    Op,
    Put,
    ReadInto,
    SizeValue,
    Stats,
    Trace,
)


def _p(*keys: str, fill: int = 0, retain: tuple[str, ...] = (), release: tuple[str, ...] = ()) -> Put:
    return Put(tuple((k, bytes([fill + i]) * 2) for i, k in enumerate(keys)), retain, release)


def _t(profile: str, capacity: int, *ops: Op) -> Trace:
    return Trace(profile, capacity * 2, 2, ops)


BOTH = ("strict", "upstream")

# name -> (description, profiles, capacity, ops)
CASES: dict[str, tuple[str, tuple[str, ...], int, tuple[Op, ...]]] = {
    "lru-evicts-least-recent": (
        "a full store evicts its least recent key",
        BOTH,
        2,
        (_p("a"), _p("b"), _p("c"), Get(("b", "c")), Get(("a",))),
    ),
    "read-refreshes-recency": (
        "a read makes its keys most recent, in the order read",
        BOTH,
        2,
        (_p("a", "b"), Get(("a",)), _p("c"), Get(("a", "c")), Get(("b",))),
    ),
    "repeated-key-read": (
        "a key may repeat in a read; an empty read is empty",
        BOTH,
        2,
        (_p("a"), Get(("a", "a")), Get(())),
    ),
    "pin-before-data": (
        "a key can be retained before it is stored, and is then never evicted",
        BOTH,
        1,
        (Put((), ("a",)), _p("a"), _p("b"), Get(("a",))),
    ),
    "pinned-key-survives-eviction": (
        "eviction skips a pinned key even when it is least recent",
        BOTH,
        2,
        (_p("a", retain=("a",)), _p("b"), _p("c"), Get(("a", "c")), Get(("b",))),
    ),
    "release-to-zero-moves-to-mru": (
        "a key whose count reaches zero becomes most recent (terminal move)",
        BOTH,
        2,
        (_p("a", retain=("a",)), _p("b"), Put((), (), ("a",)), _p("c"), Get(("a", "c")), Get(("b",))),
    ),
    "terminal-order": (
        "terminal keys move in the order their counts reached zero",
        BOTH,
        3,
        (_p("a", "b", "c", retain=("a", "b")), Put((), (), ("b", "a")), _p("d"), Get(("b",)), Get(("c",))),
    ),
    "count-above-one": (
        "a key retained twice stays pinned after one release",
        BOTH,
        1,
        (_p("a", retain=("a", "a")), Put((), (), ("a",)), _p("b"), Put((), (), ("a",)), _p("b")),
    ),
    "refcount-zero-one-zero": (
        "retain and release in one call: the key is terminal, not protected",
        BOTH,
        1,
        (_p("a"), Put((("b", b"bb"),), ("b",), ("b",)), Get(("b",)), Get(("a",))),
    ),
    "batch-dedup-last-payload": (
        "a batch keeps each key's first position and last payload",
        BOTH,
        3,
        (Put((("a", b"11"), ("b", b"22"), ("a", b"33"))), Get(("a", "b")), _p("c"), _p("d"), Get(("a",))),
    ),
    "first-write-wins": (
        "a stored key keeps its payload when put again, but becomes most recent",
        BOTH,
        2,
        (_p("a", fill=1), _p("b"), _p("a", fill=9), _p("c"), Get(("a",)), Get(("b",))),
    ),
    "batch-is-protected": (
        "the batch itself is never evicted to make room for itself",
        BOTH,
        2,
        (_p("a", retain=("a",)), _p("b", "c")),
    ),
    "capacity-failure": (
        "too few evictable keys: the put fails; strict keeps nothing of it, vLLM keeps the new count",
        BOTH,
        2,
        (_p("a", "b", retain=("a", "b")), _p("c", retain=("c",)), Get(("a", "b")), Get(("c",)), Put((), (), ("c",))),
    ),
    "capacity-failure-effects": (
        "after a capacity error vLLM keeps the re-put moves and drops only new keys; strict keeps nothing",
        BOTH,
        3,
        (_p("b", "x", "a", retain=("a",)), _p("b", "c", "e", retain=("c", "e")), _p("d"), Get(("b",)), Get(("x",))),
    ),
    "over-release": (
        "releasing a key with no reference fails (strict: nothing changes)",
        BOTH,
        2,
        (_p("a", retain=("a",)), Put((), ("b",), ("a", "a")), _p("c"), _p("d"), Get(("a",))),
    ),
    "over-release-after-zero-in-one-call": (
        "a key released to zero cannot be released again in the same call",
        BOTH,
        2,
        (_p("a", retain=("a",)), Put((), (), ("a", "a"))),
    ),
    "missing-key": (
        "reading a key that is not stored fails and changes nothing",
        BOTH,
        2,
        (_p("a"), Get(("a", "zz")), _p("b"), _p("c")),
    ),
    "capacity-one": ("a store of one object", BOTH, 1, (_p("a"), _p("b"), Get(("b",)), Get(("a",)))),
    "close-is-final": (
        "after close every call fails; close again is fine",
        BOTH,
        2,
        (_p("a"), Close(), Get(("a",)), _p("b"), Close()),
    ),
    "empty-put": ("a put with nothing in it changes nothing", BOTH, 1, (Put(), _p("a"), Put(), Get(("a",)))),
    "read-into": (
        "read_into writes the concatenation at the buffer's start; a short buffer fails",
        ("strict",),
        2,
        (_p("a", "b"), ReadInto(("b", "a"), 5), ReadInto(("a", "b"), 3), _p("c"), Get(("b",))),
    ),
    "strict-bad-payload": (
        "strict: a payload of the wrong length or type fails before any change",
        ("strict",),
        2,
        (Put((("a", b"12"), ("b", b"123")), ("a",)), Put((("a", None),)), Put((("a", b"1"),)), Get(("a",))),
    ),
    "strict-bad-keys": (
        "strict: a key that is not a str fails before any change",
        ("strict",),
        2,
        (
            _p("a"),
            Put(((1, b"11"),)),
            Put((), (1,)),
            Put((), (), (1,)),
            Get((1,)),
            ReadInto((1,), 8),
            ReadInto(("a",), 2, readonly=True),
        ),
    ),
    "observations": (
        "len, in, stats, flush and with never change the store; each fails once it is closed, like every call",
        ("strict",),
        2,
        (
            _p("a", "b", retain=("a",)),
            Len(),
            Contains("a"),
            Contains("zz"),
            Contains(1),
            Get(("b", "a", "b")),
            Get(("zz",)),
            ReadInto(("a",), 1),
            Stats(),
            Flush(),
            Enter(),
            Exit(),
            Len(),
            Contains("a"),
            Stats(),
            Flush(),
            Enter(),
            Exit(),
        ),
    ),
    "stats-count-evictions-and-failures": (
        "stats count evicted keys (a terminal batch key too) and puts that fail for lack of room",
        ("strict",),
        1,
        (
            _p("a"),
            _p("b", retain=("b",)),
            Put((("c", b"cc"),), ("c",), ("c",)),
            _p("d", "e"),
            Stats(),
            Get(("c",)),
            Stats(),
        ),
    ),
    "forms": (
        "tuples, one-pass iterators, bytearray payloads, objects other than BlockObject and memoryview buffers "
        "work as lists, bytes and bytearray do; what the caller changes after a put does not reach the store",
        ("strict",),
        2,
        (
            Put((("a", b"11"),), ("a",), (), form="tuple"),
            Put((("b", b"22"),), ("b",), ("a",), form="iter"),
            Get(("a", "b"), form="tuple"),
            Get(("b",), form="iter"),
            ReadInto(("a", "b"), 4, form="tuple"),
            ReadInto(("b",), 2, form="iter"),
            ReadInto(("b",), 1, readonly=True, form="iter"),
        ),
    ),
    "strict-bad-shapes": (
        "strict: a str or an int where a list belongs, an object without key and payload, and a buffer that "
        "is not one or not contiguous fail before any change",
        ("strict",),
        2,
        (
            _p("a"),
            Put(Bad("str")),
            Put((("b", b"bb"), Bad("object"))),
            Put((), Bad("int")),
            Put((), (), Bad("str")),
            Get(Bad("int")),
            ReadInto(Bad("str"), 2),
            ReadInto(("a",), Bad("not-buffer")),
            ReadInto(("a",), Bad("strided")),
            Get(("a",)),
        ),
    ),
}


def _big(*keys: str, fill: int = 0) -> Put:
    return Put(tuple((k, bytes([fill + i]) * BIG) for i, k in enumerate(keys)))


# name -> (description, profiles, capacity, ops) for objects of BIG bytes,
# which auxstore copies one by one rather than joined.
BIG_CASES: dict[str, tuple[str, tuple[str, ...], int, tuple[Op, ...]]] = {
    "big-objects": (
        "objects of 4 KiB evict and read like small ones",
        BOTH,
        2,
        (_big("a", "b"), _big("c", fill=7), Get(("b", "c", "b")), Get(("a",))),
    ),
    "big-objects-read-into": (
        "read_into copies 4 KiB objects into any writable buffer",
        ("strict",),
        2,
        (
            _big("a", "b"),
            ReadInto(("b", "a"), 2 * BIG),
            ReadInto(("a", "b"), 2 * BIG, form="tuple"),
            ReadInto(("a",), BIG - 1),
            Get(("b",)),
        ),
    ),
}


# name -> (description, profiles, max_bytes, object_nbytes): stores that cannot be built.
BAD_CONSTRUCTORS: dict[str, tuple[str, tuple[str, ...], SizeValue, SizeValue]] = {
    "new-object-size-zero": ("object_nbytes must be positive", BOTH, 8, 0),
    "new-too-small": ("max_bytes must hold at least one object", BOTH, 3, 4),
    "new-non-integer-size": ("strict: sizes must be ints", ("strict",), 8, 2.5),
    "new-bool-size": ("strict: a bool is not a size", ("strict",), True, 1),
}


def catalog() -> dict[str, Trace]:
    """Every named trace, as ``<profile>/<name>``."""
    traces = {
        f"{profile}/{name}": _t(profile, capacity, *ops)
        for name, (_, profiles, capacity, ops) in CASES.items()
        for profile in profiles
    }
    for name, (_, profiles, capacity, ops) in BIG_CASES.items():
        for profile in profiles:
            traces[f"{profile}/{name}"] = Trace(profile, capacity * BIG, BIG, ops)
    for name, (_, profiles, max_bytes, object_nbytes) in BAD_CONSTRUCTORS.items():
        for profile in profiles:
            traces[f"{profile}/{name}"] = Trace(profile, max_bytes, object_nbytes)
    return traces


def description(name: str) -> str:
    short = name.split("/", 1)[1]
    for table in (CASES, BIG_CASES, BAD_CONSTRUCTORS):
        if short in table:
            return str(table[short][0])
    raise KeyError(name)
