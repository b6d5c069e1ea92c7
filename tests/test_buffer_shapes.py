"""read_into's buffer shapes: every kind of writable buffer a Python caller
may pass (docs/semantics.md, section 11), drawn by the scaled decoder, built
by ``engine.calls``, held in trace files, and judged by the one compare."""

from __future__ import annotations

import random
from typing import Any

import pytest

from auxspec.engine import traces
from auxspec.engine.codec import SCALED, SPECIAL_SIZES, decode
from auxspec.engine.compare import compare
from auxspec.engine.ops import ALL, BUFFER_SHAPES, CORE, PYTHON, SHAPE_UNIT, Put, ReadInto, Trace
from auxspec.engine.table import describe, needs
from auxspec.engine.target import Target, load_target
from auxspec.engine.traces import TraceError, op_from_json, op_to_json
from auxspec.models.sequential import Err, Kind, Ok
from auxstore import BlockObjectStore


def _reads(shape: str) -> Trace:
    """Reads into ``shape`` of exact, short, larger and read-only buffers."""
    unit = SHAPE_UNIT.get(shape, 1)
    return Trace(
        "strict",
        8,
        4,
        (
            Put((("a", b"\x01\x02\x03\x04"), ("b", b"\x05\x06\x07\x08"))),
            ReadInto(("a", "b"), 8, shape=shape),
            ReadInto(("b",), 8, shape=shape),  # room to spare
            ReadInto(("a", "b"), 8 - unit, shape=shape),  # short by one item
            ReadInto(("a",), max(4, unit), readonly=True, shape=shape),
            ReadInto((), 0, shape=shape),
        ),
    )


@pytest.mark.parametrize("shape", BUFFER_SHAPES)
def test_the_spec_and_the_bundled_store_agree_on_every_shape(shape: str) -> None:
    trace = _reads(shape)
    vector = traces.vector_from_trace(trace, shape)
    assert vector.expected[1:] == (
        Ok(bytes(range(1, 9))),
        Ok(b"\x05\x06\x07\x08"),
        Err(Kind.BUFFER),
        Err(Kind.TYPE),
        Ok(b""),
    )
    assert compare(trace, load_target(None)) is None


def test_the_scaled_decoder_draws_every_shape_read_only_too_and_never_in_classic() -> None:
    rng = random.Random(12)
    scaled: set[tuple[str, bool]] = set()
    for _ in range(3000):
        data = bytes([rng.randrange(SCALED, SPECIAL_SIZES)]) + rng.randbytes(300)
        for op in decode(data, "strict", ALL).ops:
            if isinstance(op, ReadInto) and isinstance(op.buffer, int):
                assert op.buffer % SHAPE_UNIT.get(op.shape, 1) == 0, op
                scaled.add((op.shape, op.readonly))
        assert all(op.shape == "plain" for op in decode(data, "strict", CORE).ops if isinstance(op, ReadInto))
    assert scaled == {(shape, readonly) for shape in BUFFER_SHAPES for readonly in (False, True)}
    for _ in range(1000):  # the classic scope is byte-for-byte what it was: the form's buffer only
        data = bytes([rng.randrange(SCALED)]) + rng.randbytes(200)
        assert all(op.shape == "plain" for op in decode(data).ops if isinstance(op, ReadInto))


def test_a_shape_round_trips_through_a_trace_line_and_needs_a_python_target() -> None:
    op = ReadInto(("a",), 8, shape="array-I")
    assert op_to_json(op)["shape"] == "array-I" and op_from_json(op_to_json(op), "here") == op
    assert "shape" not in op_to_json(ReadInto(("a",), 8))  # plain: the line of format 1 as it was
    assert PYTHON in needs(op) and PYTHON not in needs(ReadInto(("a",), 8))
    assert describe(op) == "read_into(['a'], buffer of 8 bytes (array('I')))"
    with pytest.raises(TraceError, match="shape must be one of"):
        op_from_json({"op": "read_into", "keys": [], "buffer": 4, "shape": "numpy"}, "here")
    with pytest.raises(TraceError, match="cannot hold 6 bytes"):
        op_from_json({"op": "read_into", "keys": [], "buffer": 6, "shape": "array-I"}, "here")


class _WritesFromBase(BlockObjectStore):
    """Writes a memoryview's bytes where the object it views starts."""

    def read_into(self, keys: Any, buffer: Any) -> int:
        if isinstance(buffer, memoryview) and isinstance(buffer.obj, bytearray):
            return super().read_into(keys, buffer.obj)
        return super().read_into(keys, buffer)


class _ZeroFillsAfter(BlockObjectStore):
    """Clears the rest of the buffer after what it wrote: not observable on a
    zeroed buffer, so a correct store as far as a caller can tell."""

    def read_into(self, keys: Any, buffer: Any) -> int:
        written = super().read_into(keys, buffer)
        view = memoryview(buffer).cast("B")
        view[written:] = bytes(len(view) - written)
        return written


class _WritesPast(BlockObjectStore):
    """Writes one byte more than it reports."""

    def read_into(self, keys: Any, buffer: Any) -> int:
        written = super().read_into(keys, buffer)
        view = memoryview(buffer).cast("B")
        if written < len(view):
            view[written] = 0xEE
        return written


def _target(cls: type) -> Target:
    bundled = load_target(None)
    return Target(cls.__name__, lambda m, n: cls(max_bytes=m, object_nbytes=n), bundled.observe)


def test_writes_outside_what_the_call_reports_are_divergences() -> None:
    found = compare(_reads("offset"), _target(_WritesFromBase))
    assert found is not None and found.step == 1
    found = compare(_reads("plain"), _target(_WritesPast))
    assert found is not None and found.step == 2  # the read with room to spare
    for shape in BUFFER_SHAPES:
        assert compare(_reads(shape), _target(_ZeroFillsAfter)) is None, shape


class _WritesThenRefuses(BlockObjectStore):
    """Copies what fits into a short buffer, then refuses it."""

    def read_into(self, keys: Any, buffer: Any) -> int:
        try:
            return super().read_into(keys, buffer)
        except ValueError:
            view = memoryview(buffer).cast("B")
            view[:] = self.get_concatenated(keys)[: len(view)]
            raise


def test_a_refused_read_that_wrote_into_the_buffer_is_a_divergence() -> None:
    found = compare(_reads("plain"), _target(_WritesThenRefuses))
    assert found is not None and found.step == 3
    assert "wrote into the buffer" in found.actual
