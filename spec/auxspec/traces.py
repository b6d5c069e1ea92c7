"""Trace files: JSON Lines, a header line then one op per line with its
expected outcome. The same files are the conformance vectors.

Format 2 added the observations (``flush``, ``len``, ``contains``,
``stats``, ``enter``, ``exit``), the ``form`` of an op and ``{"bad": ...}``
shapes; a file that needs none of them is written as format 1, so readers
of format 1 keep reading it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auxspec.model import PROFILES, Err, Ok, Outcome
from auxspec.ops import (
    FORMAT,
    VERSIONS,
    Op,
    Trace,
    TraceError,
    expected_new,
    expected_outcomes,
    op_from_json,
    op_to_json,
    op_version,
    outcome_from_json,
    outcome_to_json,
    version_of,
)


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
    trace = vector.trace
    header = {
        "format": FORMAT,
        "version": version_of(trace),
        "name": vector.name,
        "description": vector.description,
        "profile": trace.profile,
        "max_bytes": trace.max_bytes,
        "object_nbytes": trace.object_nbytes,
        "expect_new": outcome_to_json(vector.expected_new),
    }
    lines = [json.dumps(header)]
    for op, outcome in zip(trace.ops, vector.expected, strict=True):
        lines.append(json.dumps({**op_to_json(op), "expect": outcome_to_json(outcome)}))
    return "\n".join(lines) + "\n"


def write(vector: Vector, path: Path) -> None:
    path.write_text(dumps(vector), encoding="utf-8")


def loads(text: str, source: str = "<trace>") -> Vector:
    """Parse a trace; any fault is a ``TraceError`` naming ``source:line``."""
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise TraceError(f"{source}:1: empty file, expected a header line")
    header = _json_line(lines[0], f"{source}:1")
    where = f"{source}:1"
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise TraceError(f'{where}: header must have "format": "{FORMAT}"')
    if header.get("version") not in VERSIONS:
        readable = " and ".join(map(str, VERSIONS))
        raise TraceError(f"{where}: version {header.get('version')!r} is not supported (this reader: {readable})")
    if header.get("profile") not in PROFILES:
        raise TraceError(f"{where}: profile must be one of {', '.join(PROFILES)}")
    for size in ("max_bytes", "object_nbytes"):
        # Any JSON scalar: a non-integer size is how a vector states a bad constructor call.
        if size not in header or isinstance(header[size], (list, dict)):
            raise TraceError(f"{where}: {size} must be given as a number")
    expect_new = outcome_from_json(header.get("expect_new", {"ok": None}), where)
    ops: list[Op] = []
    expected: list[Outcome] = []
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        where = f"{source}:{number}"
        line = _json_line(raw, where)
        op = op_from_json(line, where)
        if header["version"] < op_version(op):
            raise TraceError(f"{where}: {op.name} with this form or shape needs format version 2, the header says 1")
        ops.append(op)
        if not isinstance(line, dict) or "expect" not in line:
            raise TraceError(f'{where}: op line needs "expect"')
        expected.append(outcome_from_json(line["expect"], where))
    trace = Trace(header["profile"], header["max_bytes"], header["object_nbytes"], tuple(ops))
    if isinstance(expect_new, Err) and ops:
        raise TraceError(f"{source}:2: a store that cannot be built has no ops to run")
    return Vector(str(header.get("name", "")), str(header.get("description", "")), trace, tuple(expected), expect_new)


def load(path: Path) -> Vector:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"{path}: cannot read: {error}") from None
    return loads(text, str(path))


def _json_line(raw: str, where: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as error:
        raise TraceError(f"{where}: not JSON ({error.msg} at column {error.colno})") from None
    except ValueError as error:  # an integer longer than int() takes (sys.get_int_max_str_digits())
        raise TraceError(f"{where}: not JSON this reader takes ({error})") from None
