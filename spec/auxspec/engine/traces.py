"""Trace files: JSON Lines, a header line then one op per line with its
expected outcome. The same files are the conformance vectors.

Format 2 added the observations (``flush``, ``len``, ``contains``,
``stats``, ``enter``, ``exit``), the ``form`` of an op and ``{"bad": ...}``
shapes; a file that needs none of them is written as format 1, so readers
of format 1 keep reading it. Format 3 added compact payloads (``Compact``,
``Expander``): a long payload or ``ok`` value written as parts, one of them a
pattern repeated, so a vector of the large-store phase (330 MB of payloads)
is a file of a few MB; a file that has none is written as before. Format 4
added ``"times": N`` on an op line: the same call with the same expected
outcome N times in a row (a deep bug that needs 65,536 puts is a vector of a
few lines); a file that repeats no line is written as before."""

from __future__ import annotations

import errno
import io
import itertools
import json
import os
import re
import stat
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from auxspec.engine.expect import expected_new, expected_outcomes
from auxspec.engine.fields import Batch, Buffer, Flag, Form, Key, Keys, Payloads, Shape, shape_fits
from auxspec.engine.ops import (
    BAD_BUFFERS,
    BAD_LISTS,
    BAD_OBJECT,
    BUFFER_SHAPES,
    CORE,
    FORMS,
    PAYLOAD_KINDS,
    Bad,
    KeyList,
    KeyValue,
    Op,
    Trace,
    plain_key,
    same_call,
)
from auxspec.engine.table import BY_NAME, STATS_FIELDS, kind_of, needs
from auxspec.models import sequential as model
from auxspec.models.sequential import PROFILES, Err, Kind, Ok, Outcome

FORMAT = "auxspec-trace"
VERSION = 2  # 2 added the observations, forms and Bad shapes; a file that needs none of them is written as 1
COMPACT_VERSION = 3  # 3 added compact payloads: only a file that holds one is written as 3
REPEAT_VERSION = 4  # 4 added "times" on an op line: only a file that holds one is written as 4
VERSIONS = (1, 2, 3, 4)
# The largest read_into buffer a trace or a protocol request may ask for: far
# more than any trace reads (64 keys of 16 KiB), and a reader (auxspec serve)
# allocates it, so a line cannot make it allocate gigabytes.
MAX_BUFFER = 1 << 20
# The longest line a reader takes, in bytes without its newline: trace and
# vector lines, serve's requests and a port's answers (docs/protocol.md). The
# largest valid line is far shorter (a read_into answer of MAX_BUFFER bytes
# is 2 MiB of hex); a longer one is refused without reading the rest of it.
MAX_LINE = 1 << 24
# The deepest nesting of arrays and objects a line may have; the deepest
# valid line (a snapshot answer, a stats expectation) nests 4 deep.
MAX_DEPTH = 16
# The most bytes a reader takes from one file (a trace, a vector, a fuzzer
# input): what explain and reproduce hold in memory whole stays a few hundred
# MB, and verify's streamed replay of it a few seconds. The largest bundled
# vector is 40 KB; a batch of 600,000 objects is one line of 13 MB.
MAX_FILE = 1 << 26
# The file readers' two limits, for every command: any positive number of
# bytes through these variables (docs/protocol.md, Limits).
LINE_VARIABLE = "AUXSPEC_MAX_LINE_BYTES"
FILE_VARIABLE = "AUXSPEC_MAX_FILE_BYTES"
# The most ops a reader that holds a whole trace takes (explain and
# reproduce; verify and vectors --check stream any number): explain keeps a
# view of every step, about 4 KB each (a 290,000-op vector of 20 MB took
# 1.1 GB and 26 s of CPU), so 50,000 stay near 200 MB.
MAX_HELD_OPS = 50_000
OPS_VARIABLE = "AUXSPEC_MAX_OPS"
# And the stored keys and pins explain's steps keep in all (the store after
# each step), about 270 bytes each: 20,000 puts over a store of 100 keys hold
# 2,000,000 and peak at 575 MB. A batch of 600,000 keys read once holds 1.2 million.
MAX_HELD_KEYS = 2_000_000
KEYS_VARIABLE = "AUXSPEC_MAX_HELD_KEYS"
# The most bytes a reader makes from one file's compact payloads (a part
# {"repeat": hex, "bytes": N} is N bytes from a short line): counted as they
# are made, a payload seen again in the same file is shared, not made again.
# A vector of the default large-store phase, unshrunk, makes about 700 MB.
MAX_EXPANDED = 1 << 30
EXPANDED_VARIABLE = "AUXSPEC_MAX_EXPANDED_BYTES"
# The most calls one file stands for once its "times" are expanded (its lines
# without times count one each): a line of a few bytes may say a call is
# repeated a billion times, and every reader replays each repetition, so the
# count is checked before any is made. The deepest counter a bundled or
# written vector needs is 65,536 calls (a 16-bit one) and the depth phase's
# lives run to about 150,000; a held trace costs 8 bytes a repetition.
MAX_EXPANDED_OPS = 1 << 22
EXPANDED_OPS_VARIABLE = "AUXSPEC_MAX_EXPANDED_OPS"
# A payload or ok value this long or longer is written in parts when that is
# shorter: far above the bundled vectors' (objects of 8 KiB, values under
# 40 KB), which stay hex for every reader; the large-store phase's are 1 MB.
COMPACT_FROM = 1 << 16


class TraceError(ValueError):
    """A trace or vector file that does not follow the format; names the line."""


def op_version(op: Op) -> int:
    """The lowest format version that can hold ``op``."""
    return 2 if needs(op) - CORE else 1


def version_of(trace: Trace) -> int:
    """The lowest format version that can hold ``trace``."""
    return max(map(op_version, trace.ops), default=1)


# ------------------------------------------------------------- op lines
# ------------------------------------------------------------- compact payloads
#
# A payload or ok value in a file (not in a protocol line) may be written as
# an array of parts, each a hex string or {"repeat": hex, "bytes": N} (the
# pattern's bytes over and over, cut at N bytes); the value is the parts one
# after another. Only format 3 files hold them.


def periodic_parts(data: bytes) -> list[Any] | None:
    """``data`` as a head of at most ``_HEAD`` bytes then one block repeated
    (at most a quarter of it), as parts; None when it is not so."""
    for head in range(min(_HEAD, len(data)) + 1):
        probe = data[head : head + 32]
        period = data.find(probe, head + 1) - head
        if len(probe) < 32 or period <= 0 or 4 * period > len(data) - head:
            continue
        if data[head + period :] == data[head : len(data) - period]:
            rest = {"repeat": data[head : head + period].hex(), "bytes": len(data) - head}
            return [data[:head].hex(), rest] if head else [rest]
    return None


_HEAD = 32  # the longest head before a repeated block that periodic_parts looks for
_INDEXED = 16  # a known payload is looked for by its first bytes


class Compact:
    """Writes long values in parts: the trace's patterned payloads found
    where an ok value repeats them (a get joins the payloads it reads), runs
    of one byte as a repeat, anything else in hex. ``used`` says whether a
    part was written (the file is then format 3)."""

    def __init__(self, ops: tuple[Op, ...]) -> None:
        self.known: dict[bytes, list[bytes]] = {}  # periodic payloads by their first bytes
        self.periodic: dict[int, tuple[bytes, list[Any]]] = {}  # by id: the payload (kept alive) and its parts
        for op in ops:
            for f in kind_of(op).fields:
                value = getattr(op, f.name)
                if isinstance(f.kind, Batch) and isinstance(value, tuple):
                    for obj in value:
                        data = obj[1] if isinstance(obj, tuple) else None
                        if data is None or len(data) < COMPACT_FROM or id(data) in self.periodic:
                            continue
                        parts = periodic_parts(data)
                        if parts is not None:
                            self.periodic[id(data)] = data, parts
                            self.known.setdefault(data[:_INDEXED], []).append(data)
        self.used = False

    def value(self, data: bytes) -> Any:
        """``data`` as a file holds it: hex, or parts when they are shorter."""
        if len(data) < COMPACT_FROM:
            return data.hex()
        known = self.periodic.get(id(data))
        parts = known[1] if known is not None and known[0] is data else self._parts(data)
        if sum(len(p) if isinstance(p, str) else len(p["repeat"]) + 20 for p in parts) >= 2 * len(data):
            return data.hex()
        self.used = True
        return parts

    def _parts(self, data: bytes) -> list[Any]:
        parts: list[Any] = []
        literal = at = 0
        view = memoryview(data)

        def flush(end: int) -> None:
            if end > literal:
                parts.append(data[literal:end].hex())

        while at < len(data):
            if at - literal > COMPACT_FROM * 16:  # no known payload for a long way: the rest in hex
                break
            candidates = self.known.get(bytes(view[at : at + _INDEXED]), ())
            found = next((p for p in candidates if data.startswith(p, at)), None)
            one = data[at : at + 1]
            run = 0
            if found is None and view[at : at + 256] == one * 256:
                run = len(data) - at - len(data[at:].lstrip(one))
            if found is not None or run >= 256:
                flush(at)
                if found is not None:
                    parts.extend(self.periodic[id(found)][1])
                    at += len(found)
                else:
                    parts.append({"repeat": data[at : at + 1].hex(), "bytes": run})
                    at += run
                literal = at
            else:
                at += 1
        flush(len(data))
        return parts


class Expander:
    """Reads compact values, within ``expanded_limit()`` bytes made in all
    for one file; a value seen again is the same bytes object, not made again."""

    def __init__(self) -> None:
        self.left = expanded_limit()
        self.made: dict[str, bytes] = {}

    def value(self, parts: list[Any], where: str) -> bytes:
        text = json.dumps(parts)
        known = self.made.get(text)
        if known is not None:
            return known
        pieces: list[bytes] = []
        for part in parts:
            if isinstance(part, str):
                pieces.append(_hex(part, where))
                continue
            _want(
                isinstance(part, dict) and set(part) == {"repeat", "bytes"} and isinstance(part["repeat"], str),
                where,
                'a part is hex or {"repeat": hex, "bytes": N}',
            )
            pattern, count = _hex(part["repeat"], where), part["bytes"]
            fills = type(count) is int and count >= 0 and (len(pattern) > 0 or count == 0)
            _want(fills, where, "bytes is a count of bytes, and a pattern is not empty")
            if count > self.left:
                raise TraceError(
                    f"{where}: the file's compact payloads make more than {expanded_limit()} bytes, the most a "
                    f"reader makes ({EXPANDED_VARIABLE} raises it)"
                )
            self.left -= count
            pieces.append((pattern * (count // max(len(pattern), 1) + 1))[:count])
        made = b"".join(pieces)
        if len(self.made) >= _SEEN_MOST:
            self.made.clear()
        self.made[text] = made
        return made


def _hex(text: str, where: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise TraceError(f"{where}: {text[:40]!r} is not hex") from None


def _payload_from_json(value: Any, where: str, expand: Expander | None) -> bytes:
    if isinstance(value, str):
        return _hex(value, where)
    _want(expand is not None and isinstance(value, list), where, "payload must be hex or null")
    assert expand is not None
    return expand.value(value, where)


def expanded_limit() -> int:
    """The most bytes a reader makes from one file's compact payloads:
    ``MAX_EXPANDED`` or ``EXPANDED_VARIABLE``.

    raises: TraceError"""
    return _limit(EXPANDED_VARIABLE, MAX_EXPANDED, "bytes")


def expanded_size(path: Path) -> int:
    """The bytes the compact payloads of the file at ``path`` stand for,
    counted without making them (each value once per line): what a reader
    needs ``EXPANDED_VARIABLE`` at to read it; 0 when unreadable."""
    total = 0
    try:
        with path.open("rb") as stream:
            for raw in stream:
                if b'"repeat"' in raw:
                    total += sum(int(n) for n in _REPEAT_BYTES.findall(raw))
    except (OSError, ValueError):
        return 0
    return total


_REPEAT_BYTES = re.compile(rb'"bytes": (\d+)')


# Field by field, by kind (auxspec.engine.fields): the op table says which
# fields an op has; this says how each kind of field reads and writes.


def op_to_json(op: Op, compact: Compact | None = None) -> dict[str, Any]:
    """``op`` as a trace line (without its expectation); long payloads in
    parts given ``compact`` (a file's line, never a protocol request)."""
    body: dict[str, Any] = {"op": op.name}
    for f in kind_of(op).fields:
        value = getattr(op, f.name)
        if not (
            (isinstance(f.kind, Form) and value == "list")
            or (isinstance(f.kind, Shape) and value == "plain")
            or (isinstance(f.kind, Payloads) and value == "bytes")  # the default: format 2 lines without it read so
        ):
            is_batch = isinstance(f.kind, Batch)
            body[f.name] = _batch_to_json(value, compact) if is_batch else _TO_JSON[type(f.kind)](value)
    return body


def op_from_json(line: Any, where: str, expand: Expander | None = None) -> Op:
    """The op a trace line (or protocol request) stands for; compact
    payloads only given ``expand`` (a format 3 file's line)."""
    _want(isinstance(line, dict) and isinstance(line.get("op"), str), where, 'an op line needs "op"')
    row = BY_NAME.get(line["op"])
    if row is None:
        raise TraceError(f"{where}: unknown op {line['op']!r}")
    values = {}
    for f in row.fields:
        if f.name in line or f.required:
            value = line.get(f.name)
            is_batch = isinstance(f.kind, Batch)
            values[f.name] = (
                _batch_from_json(value, where, expand) if is_batch else _FROM_JSON[type(f.kind)](value, where)
            )
        if isinstance(f.kind, Shape) and f.name in values:
            size = next((values.get(g.name, 0) for g in row.fields if isinstance(g.kind, Buffer)), 0)
            _want(
                shape_fits(size, values[f.name]), where, f"a buffer of shape {values[f.name]} cannot hold {size} bytes"
            )
    return row.cls(**values)  # type: ignore[no-any-return]


def _want(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise TraceError(f"{where}: {what}")


def _bad_to_json(value: Any) -> Any:
    return {"bad": value.what} if isinstance(value, Bad) else value


def _keys_to_json(keys: KeyList) -> Any:
    return _bad_to_json(keys) if isinstance(keys, Bad) else list(map(plain_key, keys))


def _batch_to_json(objects: Any, compact: Compact | None = None) -> Any:
    if isinstance(objects, Bad):
        return _bad_to_json(objects)

    def payload(data: bytes | None) -> Any:
        return None if data is None else data.hex() if compact is None else compact.value(data)

    return [_bad_to_json(obj) if isinstance(obj, Bad) else [plain_key(obj[0]), payload(obj[1])] for obj in objects]


# A str subclass key (ops.KeyStr) is written as its plain str, as json.dumps
# would write it anyway; made plain here so the line (and a protocol request)
# holds no subclass instance at all.
_TO_JSON: dict[type, Any] = {
    Key: plain_key,
    Keys: _keys_to_json,
    Batch: _batch_to_json,
    Buffer: _bad_to_json,
    Flag: lambda value: value,
    Form: lambda value: value,
    Shape: lambda value: value,
    Payloads: lambda value: value,
}


def _bad_from_json(value: Any, where: str, allowed: tuple[str, ...]) -> Bad | None:
    """``{"bad": what}`` as a ``Bad``; None for any other value."""
    if not isinstance(value, dict):
        return None
    _want(set(value) == {"bad"} and value["bad"] in allowed, where, f'a bad value is {{"bad": one of {list(allowed)}}}')
    return Bad(value["bad"])


def _key_from_json(value: Any, where: str) -> KeyValue:
    _want(isinstance(value, (str, int)) and not isinstance(value, bool), where, f"key must be a string, got {value!r}")
    return value  # type: ignore[no-any-return]


def _keys_from_json(value: Any, where: str) -> KeyList:
    bad = _bad_from_json(value, where, BAD_LISTS)
    if bad is not None:
        return bad
    _want(isinstance(value, list), where, "keys must be a list")
    return tuple(_key_from_json(k, where) for k in value)


def _object_from_json(obj: Any, where: str, expand: Expander | None = None) -> Any:
    bad = _bad_from_json(obj, where, (BAD_OBJECT,))
    if bad is not None:
        return bad
    _want(isinstance(obj, list) and len(obj) == 2, where, "each object is [key, hex payload or null]")
    payload = obj[1]
    _want(payload is None or isinstance(payload, (str, list)), where, "payload must be hex or null")
    data = None if payload is None else _payload_from_json(payload, where, expand)
    return _key_from_json(obj[0], where), data


def _batch_from_json(raw: Any, where: str, expand: Expander | None = None) -> Any:
    bad = _bad_from_json(raw, where, BAD_LISTS)
    if bad is not None:
        return bad
    _want(isinstance(raw, list), where, "objects must be a list")
    return tuple(_object_from_json(obj, where, expand) for obj in raw)


def _buffer_from_json(buffer: Any, where: str) -> Any:
    bad = _bad_from_json(buffer, where, BAD_BUFFERS)
    _want(
        bad is not None or (isinstance(buffer, int) and not isinstance(buffer, bool) and 0 <= buffer <= MAX_BUFFER),
        where,
        f"buffer is a size from 0 to {MAX_BUFFER}",
    )
    return bad or buffer


def _flag_from_json(value: Any, where: str) -> bool:
    _want(isinstance(value, bool), where, "readonly must be true or false")
    return bool(value)


def _form_from_json(form: Any, where: str) -> str:
    _want(form in FORMS, where, f"form must be one of {', '.join(FORMS)}")
    return str(form)


def _shape_from_json(shape: Any, where: str) -> str:
    _want(shape in BUFFER_SHAPES, where, f"shape must be one of {', '.join(BUFFER_SHAPES)}")
    return str(shape)


def _payloads_from_json(kind: Any, where: str) -> str:
    _want(kind in PAYLOAD_KINDS, where, f"payloads must be one of {', '.join(PAYLOAD_KINDS)}")
    return str(kind)


_FROM_JSON: dict[type, Any] = {
    Key: _key_from_json,
    Keys: _keys_from_json,
    Batch: _batch_from_json,
    Buffer: _buffer_from_json,
    Flag: _flag_from_json,
    Form: _form_from_json,
    Shape: _shape_from_json,
    Payloads: _payloads_from_json,
}


# ------------------------------------------------------------- outcomes


def outcome_to_json(outcome: Outcome, compact: Compact | None = None) -> dict[str, Any]:
    """``outcome`` as a line's ``expect`` (or an answer); a long value in parts given ``compact``."""
    if isinstance(outcome, Err):
        return {"error": outcome.kind.value}
    value = outcome.value
    if isinstance(value, bytes):
        return {"ok": value.hex() if compact is None else compact.value(value)}
    if isinstance(value, model.Stats):
        return {"ok": {name: getattr(value, name) for name in STATS_FIELDS}}
    return {"ok": value}


def outcome_from_json(value: Any, where: str, expand: Expander | None = None) -> Outcome:
    _want(isinstance(value, dict) and len(value) == 1, where, 'expect is {"ok": ...} or {"error": kind}')
    if "error" in value:
        try:
            return Err(Kind(value["error"]))
        except ValueError:
            raise TraceError(f"{where}: unknown error kind {value['error']!r}") from None
    _want("ok" in value, where, 'expect is {"ok": ...} or {"error": kind}')
    ok = value["ok"]
    if ok is None or isinstance(ok, (bool, int)):
        return Ok(ok)
    if isinstance(ok, dict):
        _want(
            set(ok) == set(STATS_FIELDS) and all(type(ok[name]) is int for name in STATS_FIELDS),
            where,
            f"stats are an object of the ints {', '.join(STATS_FIELDS)}",
        )
        return Ok(model.Stats(*(ok[name] for name in STATS_FIELDS)))
    _want(
        isinstance(ok, str) or (expand is not None and isinstance(ok, list)),
        where,
        "ok value is hex, an int, a bool, stats or null",
    )
    return Ok(_payload_from_json(ok, where, expand))


# ------------------------------------------------------------- files


@dataclass(frozen=True)
class Vector:
    """A trace with the outcome the spec expects after each op."""

    name: str
    description: str
    trace: Trace
    expected: tuple[Outcome, ...]
    expected_new: Outcome = field(default_factory=Ok)  # building the store; an error means no op runs


def vector_from_trace(trace: Trace, name: str, description: str = "") -> Vector:
    """The vector whose expectations the spec computes for ``trace``."""
    outcomes = tuple(outcome for outcome, _ in expected_outcomes(trace))
    return Vector(name, description, trace, outcomes, expected_new(trace))


def dumps(vector: Vector) -> str:
    """The file of ``vector``: long payloads and values in parts where that
    is shorter (then format 3)."""
    trace = vector.trace
    compact = Compact(trace.ops)
    body = []
    repeated = False
    for op, outcome, times in entries(trace.ops, vector.expected):
        line = {**op_to_json(op, compact), "expect": outcome_to_json(outcome, compact)}
        if times > 1:
            line["times"] = times
            repeated = True
        body.append(json.dumps(line))
    version = REPEAT_VERSION if repeated else COMPACT_VERSION if compact.used else version_of(trace)
    header = {
        "format": FORMAT,
        "version": version,
        "name": vector.name,
        "description": vector.description,
        "profile": trace.profile,
        "max_bytes": trace.max_bytes,
        "object_nbytes": trace.object_nbytes,
        "expect_new": outcome_to_json(vector.expected_new),
    }
    return "\n".join([json.dumps(header), *body]) + "\n"


def entries(ops: tuple[Op, ...], outcomes: tuple[Outcome, ...]) -> Iterator[tuple[Op, Outcome, int]]:
    """The lines a file holds for ``ops`` with their expected ``outcomes``:
    each run of the same call with the same outcome once, with how many
    times it is made in a row (written as ``"times"`` when more than 1)."""
    run = 0
    for index, (op, outcome) in enumerate(zip(ops, outcomes, strict=True)):
        run += 1
        last = index + 1 == len(ops)
        if last or not same_call(ops[index + 1], op) or outcomes[index + 1] != outcome:
            yield op, outcome, run
            run = 0


def entry_count(vector: Vector) -> int:
    """How many op lines the file of ``vector`` has: its length as a
    counterexample (a call repeated in a row is one line)."""
    return sum(1 for _ in entries(vector.trace.ops, vector.expected))


def write(vector: Vector, path: Path) -> None:
    path.write_text(dumps(vector), encoding="utf-8")


@dataclass(frozen=True)
class Header:
    """A trace file's first line."""

    name: str
    description: str
    profile: str
    max_bytes: Any
    object_nbytes: Any
    expect_new: Outcome
    version: int


def loads(text: str, source: str = "<trace>") -> Vector:
    """Parse a trace; any fault is a ``TraceError`` naming ``source:line``."""
    return _vector(io.StringIO(text), source)


def load(path: Path, held: bool = False) -> Vector:
    """The vector in the file at ``path``, read line by line (within
    ``file_limits()``). ``held``: for a command that keeps a view of every
    op, which takes at most ``held_ops_limit()`` of them."""
    most = held_ops_limit() if held else None
    try:
        with open_file(path) as stream:
            return _vector(stream, str(path), most)
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error}") from None


def file_limits() -> tuple[int, int]:
    """The longest line and the most bytes a file reader takes: ``MAX_LINE``
    and ``MAX_FILE``, or what ``LINE_VARIABLE`` and ``FILE_VARIABLE`` say.

    raises: TraceError (a variable that is not a positive integer)"""
    return _limit(LINE_VARIABLE, MAX_LINE, "bytes"), _limit(FILE_VARIABLE, MAX_FILE, "bytes")


def held_ops_limit() -> int:
    """The most ops ``load(path, held=True)`` takes: ``MAX_HELD_OPS`` or ``OPS_VARIABLE``.

    raises: TraceError"""
    return _limit(OPS_VARIABLE, MAX_HELD_OPS, "ops")


def held_keys_limit() -> int:
    """The most keys and pins explain's steps keep: ``MAX_HELD_KEYS`` or ``KEYS_VARIABLE``.

    raises: TraceError"""
    return _limit(KEYS_VARIABLE, MAX_HELD_KEYS, "keys")


def _limit(variable: str, default: int, unit: str) -> int:
    given = os.environ.get(variable, "").strip()
    if not given:
        return default
    if not given.isdigit() or int(given) == 0 or len(given) > 18:
        raise TraceError(f"{variable}={given!r}: give a positive number of {unit}")
    return int(given)


def open_file(path: Path) -> BinaryIO:
    """``path`` open for reading, without waiting for a writer: a FIFO that
    nobody writes to reads as empty, not as a hang.

    raises: OSError"""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if stat.S_ISDIR(os.fstat(descriptor).st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_bytes(path: Path) -> bytes:
    """The whole file at ``path`` (a fuzzer input), at most the file limit.

    raises: TraceError"""
    _, total = file_limits()
    try:
        with open_file(path) as stream:
            data = stream.read(total + 1)
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error}") from None
    if len(data) > total:
        raise TraceError(f"{path}: longer than {total} bytes, the most a reader takes ({FILE_VARIABLE} raises it)")
    return data


def scan(path: Path) -> tuple[Header, Iterator[tuple[Op, Outcome]]]:
    """The header of the file at ``path`` and its ops with their expected
    outcomes, read as they are consumed: memory does not grow with the file.

    raises: TraceError
    """
    try:
        stream = open_file(path)
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error}") from None
    try:
        lines = lines_of(stream, str(path), *file_limits())
        header = _header(lines, str(path))
    except BaseException:
        stream.close()
        raise

    def ops() -> Iterator[tuple[Op, Outcome]]:
        with stream:
            yield from _ops(lines, header, str(path))

    return header, ops()


@dataclass(frozen=True)
class VectorFile:
    """A vector file read through once to check every line and count its ops,
    holding none of them: its ops are read again as they are replayed
    (``ops``), so a file of any length replays in the same memory."""

    path: Path
    header: Header
    steps: int  # its ops
    needs: frozenset[str]  # the features a target must have to run them all

    @property
    def name(self) -> str:
        return self.header.name

    @property
    def profile(self) -> str:
        return self.header.profile

    def head(self) -> Trace:
        """The trace's profile and sizes, without its ops."""
        return Trace(self.header.profile, self.header.max_bytes, self.header.object_nbytes)

    def ops(self) -> Generator[Op]:
        """The ops, read from the file as they are consumed.

        raises: TraceError (the file changed since it was surveyed)"""
        return (op for op, _ in self.pairs())

    def pairs(self) -> Iterator[tuple[Op, Outcome]]:
        """The ops with their recorded outcomes, read as they are consumed.

        raises: TraceError (the file changed since it was surveyed)"""
        return scan(self.path)[1]

    def prefix(self, count: int) -> tuple[Op, ...]:
        """The first ``count`` ops (to show the trace up to a divergence)."""
        ops = self.ops()
        try:
            return tuple(itertools.islice(ops, count))
        finally:
            ops.close()


def survey(path: Path) -> VectorFile:
    """The file at ``path`` checked line by line as ``load`` does, keeping
    only its header, how many ops it has and what they need.

    raises: TraceError
    """
    header, pairs = scan(path)
    steps, found = 0, set[str]()
    for op, _ in pairs:
        steps += 1
        found |= needs(op)
    return VectorFile(path, header, steps, frozenset(found))


def lines_of(
    stream: IO[Any], source: str, limit: int = MAX_LINE, total: int | None = None
) -> Iterator[tuple[int, str]]:
    """Each line of ``stream`` (bytes or text) with its number, without its
    newline; a ``TraceError`` for a line longer than ``limit`` (its rest is
    not read), for the line that takes the stream past ``total`` bytes, or
    for one that is not UTF-8. A file known to be longer than ``total`` is
    refused before any line is parsed, naming the same line."""
    if total is not None and _size_of(stream) > total:
        raise _oversize(stream, source, limit, total)
    number = read = 0
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        number += 1
        read += len(raw)
        if total is not None and read > total:
            raise TraceError(_past_total(source, number, total))
        newline = b"\n" if isinstance(raw, bytes) else "\n"
        if raw.endswith(newline):
            raw = raw[:-1]
        elif len(raw) > limit:
            raise TraceError(f"{source}:{number}: line longer than {limit} bytes (the rest was not read)")
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise TraceError(f"{source}:{number}: not UTF-8 ({error})") from None
        yield number, raw


def _size_of(stream: IO[Any]) -> int:
    """The size of the regular file behind ``stream``; 0 for anything else."""
    try:
        status = os.fstat(stream.fileno())
    except (OSError, ValueError):  # a text buffer (io.UnsupportedOperation), a closed stream
        return 0
    return status.st_size if stat.S_ISREG(status.st_mode) else 0


def _oversize(stream: IO[bytes], source: str, limit: int, total: int) -> TraceError:
    """The error ``lines_of`` would meet in a file longer than ``total``,
    found by counting bytes and newlines only (1 MiB at a time), not parsing."""
    number, length, read = 1, 0, 0
    while read <= total:
        chunk = stream.read(min(1 << 20, total + 1 - read))
        if not chunk:
            break
        read += len(chunk)
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if length + end - start > limit:
                break
            number, length, start = number + 1, 0, end + 1
        length += len(chunk) - start
        if length > limit:
            return TraceError(f"{source}:{number}: line longer than {limit} bytes (the rest was not read)")
    return TraceError(_past_total(source, number, total))


def _past_total(source: str, number: int, total: int) -> str:
    return (
        f"{source}:{number}: the file goes past {total} bytes here, the most a reader takes "
        f"({FILE_VARIABLE} raises it; the rest was not read)"
    )


def _vector(stream: IO[Any], source: str, most: int | None = None) -> Vector:
    at = [0]  # the number of the line read last
    lines = _noting(lines_of(stream, source, *file_limits()), at)
    header = _header(lines, source)
    ops: list[Op] = []
    expected: list[Outcome] = []
    # Counted in op lines: a line repeated by "times" holds its op once, however many calls it stands for.
    for held, (op, outcome, times) in enumerate(_entries(lines, header, source), start=1):
        ops.extend(itertools.repeat(op, times))
        expected.extend(itertools.repeat(outcome, times))
        if most is not None and held > most:
            raise TraceError(
                f"{source}:{at[0]}: more than {most} ops, the most a command that shows every op takes "
                f"({OPS_VARIABLE} raises it; the rest was not read)"
            )
    trace = Trace(header.profile, header.max_bytes, header.object_nbytes, tuple(ops))
    return Vector(header.name, header.description, trace, tuple(expected), header.expect_new)


def _noting(lines: Iterator[tuple[int, str]], at: list[int]) -> Iterator[tuple[int, str]]:
    for number, raw in lines:
        at[0] = number
        yield number, raw


def _header(lines: Iterator[tuple[int, str]], source: str) -> Header:
    first = next(lines, None)
    if first is None or not first[1].strip():
        raise TraceError(f"{source}:1: empty file, expected a header line")
    header = _json_line(first[1], f"{source}:1")
    where = f"{source}:1"
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise TraceError(f'{where}: header must have "format": "{FORMAT}"')
    if type(header.get("version")) is not int or header["version"] not in VERSIONS:  # not true, which == 1
        readable = " and ".join(map(str, VERSIONS))
        raise TraceError(f"{where}: version {header.get('version')!r} is not supported (this reader: {readable})")
    if header.get("profile") not in PROFILES:
        raise TraceError(f"{where}: profile must be one of {', '.join(PROFILES)}")
    for size in ("max_bytes", "object_nbytes"):
        # Any JSON scalar: a non-integer size is how a vector states a bad constructor call.
        if size not in header or isinstance(header[size], (list, dict)):
            raise TraceError(f"{where}: {size} must be given as a number")
    expect_new = outcome_from_json(header.get("expect_new", {"ok": None}), where)
    return Header(
        printable(str(header.get("name", ""))),
        printable(str(header.get("description", ""))),
        header["profile"],
        header["max_bytes"],
        header["object_nbytes"],
        expect_new,
        header["version"],
    )


_SEEN_MOST = 4096  # distinct op lines remembered while reading one file


def _ops(lines: Iterator[tuple[int, str]], header: Header, source: str) -> Iterator[tuple[Op, Outcome]]:
    """Each call of the file with its expected outcome: a line with
    ``"times": N`` is N calls (the same objects N times)."""
    for op, outcome, times in _entries(lines, header, source):
        for _ in range(times):
            yield op, outcome


def _times(line: Any, where: str, lacking: int | None = None) -> int:
    """How many calls an op line stands for: its ``times``, a JSON integer
    of at least 1 (not ``true``, not ``2.0``); refused in a file whose
    version is below ``lacking`` (the version that added it), when given."""
    if not isinstance(line, dict) or "times" not in line:
        return 1
    times = line["times"]
    _want(lacking is None, where, f'"times" needs format version {lacking}')
    shown = repr(times)[:40]
    _want(type(times) is int and times >= 1, where, f"times is a whole number of calls, 1 or more, got {shown}")
    return int(times)


def _spend(times: int, left: int, where: str) -> int:
    """The calls the file may still make after a line of ``times`` calls,
    checked before any of them is made."""
    if times > left:
        raise TraceError(
            f"{where}: the file's lines make more than {expanded_ops_limit()} calls with their times, the most a "
            f"reader makes ({EXPANDED_OPS_VARIABLE} raises it)"
        )
    return left - times


def expanded_ops_limit() -> int:
    """The most calls one file's lines may stand for, their ``times``
    expanded: ``MAX_EXPANDED_OPS`` or ``EXPANDED_OPS_VARIABLE``.

    raises: TraceError"""
    return _limit(EXPANDED_OPS_VARIABLE, MAX_EXPANDED_OPS, "calls")


def _entries(lines: Iterator[tuple[int, str]], header: Header, source: str) -> Iterator[tuple[Op, Outcome, int]]:
    """The one reader of a trace file's op lines: each line's op, its
    expected outcome and how many times in a row it is made."""
    # A line seen before stands for the same (immutable) op and outcome: a
    # long machine-made vector repeats its lines, and then shares their objects.
    seen: dict[str, tuple[Op, Outcome, int]] = {}
    expand = Expander() if header.version >= COMPACT_VERSION else None
    left = expanded_ops_limit()
    for number, raw in lines:
        known = seen.get(raw)
        if known is not None:
            left = _spend(known[2], left, f"{source}:{number}")
            yield known
            continue
        if not raw.strip():
            continue
        where = f"{source}:{number}"
        if isinstance(header.expect_new, Err):
            raise TraceError(f"{where}: a store that cannot be built has no ops to run")
        line = _json_line(raw, where)
        op = op_from_json(line, where, expand)
        if header.version < op_version(op):
            raise TraceError(f"{where}: {op.name} with this form or shape needs format version 2, the header says 1")
        if not isinstance(line, dict) or "expect" not in line:
            raise TraceError(f'{where}: op line needs "expect"')
        times = _times(line, where, None if header.version >= REPEAT_VERSION else REPEAT_VERSION)
        left = _spend(times, left, where)
        entry = op, outcome_from_json(line["expect"], where, expand), times
        if len(seen) >= _SEEN_MOST:
            seen.clear()
        seen[raw] = entry
        yield entry


def _json_line(raw: str, where: str) -> Any:
    try:
        return parse_json(raw)
    except json.JSONDecodeError as error:
        raise TraceError(f"{where}: not JSON ({error.msg} at column {error.colno})") from None
    except ValueError as error:  # too deep, or an integer longer than int() takes
        raise TraceError(f"{where}: not JSON this reader takes ({error})") from None


def parse_json(text: str) -> Any:
    """The JSON value of one line: nested at most ``MAX_DEPTH`` deep.

    raises: ValueError (JSONDecodeError; too deep; an integer longer than
    ``int()`` takes)
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH}") from None
    if type(value) is not list and type(value) is not dict:
        return value
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:  # a loop, not recursion: the value may nest a thousand deep
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH}")
        inner = depth + 1  # only containers are pushed: a line's many strings and numbers are passed over at once
        children = item.values() if type(item) is dict else item
        stack.extend([(child, inner) for child in children if type(child) is list or type(child) is dict])
    return value


# C0 and C1 controls, DEL, and the bidirectional overrides and isolates: what
# can move a terminal's cursor, recolour it or reorder the text around it.
# And the surrogates: a key may hold a lone one (JSON's "\ud800"), which no
# UTF-8 stream can write.
_UNPRINTABLE = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in (
        *range(0x20),
        *range(0x7F, 0xA0),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
        *range(0xD800, 0xE000),
    )
}


_UNPRINTABLE_BUT_NEWLINES = {code: shown for code, shown in _UNPRINTABLE.items() if code != ord("\n")}


def printable(text: str, newlines: bool = False) -> str:
    """``text`` with what could control a terminal shown as escapes (but
    newlines, with ``newlines``)."""
    return text.translate(_UNPRINTABLE_BUT_NEWLINES if newlines else _UNPRINTABLE)


# ------------------------------------------------------- background vectors
# A background store's counterexample: the owner calls as op lines (without
# expectations: at a call whose failure is still in flight the spec allows
# more than one outcome, so the driver judges them against the model), with
# the writer's schedule between them as {"writer": n} lines (the writer may
# apply up to n more queued batches before the next call), so a replay holds
# the writer where the run that failed held it. A separate format name: the
# trace readers above refuse it with their header message, not a wrong replay.

BACKGROUND_FORMAT = "auxspec-background-trace"
BACKGROUND_VERSION = 1
BACKGROUND_REPEAT_VERSION = 2  # 2 added "times" on an owner call's line: only a file that holds one is written as 2


@dataclass(frozen=True)
class BackgroundVector:
    """A background scenario as a file holds it: ``steps`` are ops and, as
    ints, the writer's releases; ``faults`` the inner calls (0-based) that
    raise, with the exception's type name."""

    name: str
    description: str
    profile: str
    max_bytes: int
    object_nbytes: int
    max_pending_batches: Any
    steps: tuple[Op | int, ...]
    faults: tuple[tuple[int, str], ...] = ()
    inner: str = "store"
    ending: str = "close"


def dumps_background(vector: BackgroundVector) -> str:
    lines = []
    repeated = False
    for step, times in _step_runs(vector.steps):
        line: dict[str, Any] = {"writer": step} if isinstance(step, int) else op_to_json(step)
        if times > 1:
            line["times"] = times
            repeated = True
        lines.append(json.dumps(line))
    header = {
        "format": BACKGROUND_FORMAT,
        "version": BACKGROUND_REPEAT_VERSION if repeated else BACKGROUND_VERSION,
        "name": vector.name,
        "description": vector.description,
        "profile": vector.profile,
        "max_bytes": vector.max_bytes,
        "object_nbytes": vector.object_nbytes,
        "max_pending_batches": vector.max_pending_batches,
        "faults": [list(fault) for fault in vector.faults],
        "inner": vector.inner,
        "ending": vector.ending,
    }
    return "\n".join([json.dumps(header), *lines]) + "\n"


def _step_runs(steps: tuple[Op | int, ...]) -> Iterator[tuple[Op | int, int]]:
    """A background vector's steps as lines: each run of the same owner call
    made in a row once, with how many times (the writer's releases one by one)."""
    runs: list[list[Any]] = []
    for step in steps:
        if not isinstance(step, int) and runs and not isinstance(runs[-1][0], int) and runs[-1][0] == step:
            runs[-1][1] += 1
        else:
            runs.append([step, 1])
    for step, times in runs:
        yield step, times


def header_format(path: Path) -> str | None:
    """The ``format`` of the header line of the file at ``path``, whatever
    its name; None when its first line is no JSON object with a string
    ``format`` (not UTF-8, not JSON, longer than the line limit) or the file
    cannot be read. Readers tell a trace or vector file from a fuzzer's raw
    input by this, so a file verify wrote under any name replays."""
    try:
        limit, _ = file_limits()  # a bad limit variable: the reader that follows says so
        with open_file(path) as stream:  # a FIFO with no writer reads as empty
            first = stream.readline(limit + 1)
        header = parse_json(first.decode("utf-8"))  # bounded depth: a hostile first line is no header
    except (OSError, TraceError, ValueError):
        return None
    found = header.get("format") if isinstance(header, dict) else None
    return found if isinstance(found, str) else None


def is_background(path: Path) -> bool:
    """Whether the file at ``path`` starts with a background vector's header."""
    return header_format(path) == BACKGROUND_FORMAT


def load_background(path: Path) -> BackgroundVector:
    """The background vector in the file at ``path``.

    raises: TraceError"""
    source = str(path)
    try:
        with open_file(path) as stream:  # a FIFO with no writer reads as empty
            lines = lines_of(stream, source)
            first = next(lines, None)
            if first is None:
                raise TraceError(f"{source}:1: empty file, expected a header line")
            header = _json_line(first[1], f"{source}:1")
            where = f"{source}:1"
            _want(
                isinstance(header, dict) and header.get("format") == BACKGROUND_FORMAT, where, "not a background vector"
            )
            version = header.get("version")
            _want(version in (BACKGROUND_VERSION, BACKGROUND_REPEAT_VERSION) and type(version) is int, where, "version")
            _want(header.get("profile") in PROFILES, where, f"profile must be one of {', '.join(PROFILES)}")
            for size in ("max_bytes", "object_nbytes"):
                _want(type(header.get(size)) is int and header[size] > 0, where, f"{size} must be a positive integer")
            _want(
                not isinstance(header.get("max_pending_batches"), (list, dict)), where, "max_pending_batches: a scalar"
            )
            faults = header.get("faults", [])
            _want(
                isinstance(faults, list)
                and all(
                    isinstance(f, list) and len(f) == 2 and type(f[0]) is int and isinstance(f[1], str) for f in faults
                ),
                where,
                "faults must be [inner call, exception type] pairs",
            )
            steps: list[Op | int] = []
            left = expanded_ops_limit()
            for number, raw in lines:
                if not raw.strip():
                    continue
                line = _json_line(raw, f"{source}:{number}")
                if isinstance(line, dict) and "writer" in line and "op" not in line:
                    count = line["writer"]
                    _want(type(count) is int and count > 0, f"{source}:{number}", "writer needs a positive count")
                    steps.append(count)
                else:
                    op = op_from_json(line, f"{source}:{number}")
                    lacking = None if version == BACKGROUND_REPEAT_VERSION else BACKGROUND_REPEAT_VERSION
                    times = _times(line, f"{source}:{number}", lacking)
                    left = _spend(times, left, f"{source}:{number}")
                    steps.extend(itertools.repeat(op, times))
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error}") from None
    return BackgroundVector(
        printable(str(header.get("name", ""))),
        printable(str(header.get("description", ""))),
        header["profile"],
        header["max_bytes"],
        header["object_nbytes"],
        header.get("max_pending_batches"),
        tuple(steps),
        tuple((index, name) for index, name in faults),
        str(header.get("inner", "store")),
        str(header.get("ending", "close")),
    )
