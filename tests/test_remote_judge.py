"""The remote judge (auxspec.drivers.remote) has teeth, without a server.

``RedisBlockObjectStore`` runs here on ``FlakyEngine``, a stand-in for a
Redis client whose engine evicts keys at random between calls and now and
then refuses a write for memory (seeded, so each run is reproducible). The
store as shipped must conform at seeds 1-3; each subtly wrong store below
(every one a plausible mistake in a remote backend) must be flagged at each
of them. tests/test_remote_redis.py does the same against a live server.
"""

from __future__ import annotations

import os
import random
import unicodedata
from typing import Any

import pytest

try:
    import redis
except ImportError:
    if os.environ.get("CI"):  # CI installs the extra: a missing client there is a failure, not a skip
        raise
    pytest.skip("the remote store's tests need the redis client: pip install auxstore[redis]", allow_module_level=True)

from auxspec.drivers.remote import EngineFailure, judge, remote_trace, search
from auxspec.engine.ops import PYTHON, READ_INTO
from auxspec.engine.target import Target
from auxspec.models.sequential import Err, Kind, Ok
from auxstore import BlockObject, BlockObjectStore, BlockObjectStoreError, CapacityError, MissingKeyError
from auxstore._batch import check_batch, read_keys
from auxstore.remote import RedisBlockObjectStore

SEEDS = (1, 2, 3)
TRACES = 300


class FlakyEngine:
    """The calls of ``redis.Redis`` the store makes, on a dict that loses
    each key with probability ``evict`` before every call and refuses a
    write with probability ``refuse`` (as Redis answers ``OOM``)."""

    def __init__(self, seed: int, evict: float = 0.15, refuse: float = 0.1) -> None:
        self.data: dict[bytes, bytes] = {}
        self.random = random.Random(seed)
        self.evict, self.refuse = evict, refuse
        self.evictions = 0

    def _weather(self) -> None:
        for name in list(self.data):
            if self.random.random() < self.evict:
                del self.data[name]
                self.evictions += 1

    def _write(self) -> None:
        self._weather()
        if self.random.random() < self.refuse:
            raise redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")

    def mset(self, mapping: dict[bytes, bytes]) -> bool:
        self._write()
        self.data.update(mapping)
        return True

    def set(self, name: bytes, value: bytes) -> bool:
        self._write()
        self.data[name] = value
        return True

    def mget(self, names: list[bytes]) -> list[bytes | None]:
        self._weather()
        return [self.data.get(name) for name in names]

    def get(self, name: bytes) -> bytes | None:
        self._weather()
        return self.data.get(name)

    def exists(self, name: bytes) -> int:
        self._weather()
        return int(name in self.data)

    def close(self) -> None:
        pass

    def pipeline(self, transaction: bool = True) -> FlakyPipeline:
        return FlakyPipeline(self)


class FlakyPipeline:
    """``MULTI``/``EXEC`` on FlakyEngine: the queued commands run whole, after
    one eviction, and a refused write refuses the whole transaction (as Redis
    does for a command refused with OOM while queued)."""

    def __init__(self, engine: FlakyEngine) -> None:
        self.engine = engine
        self.queued: list[tuple[str, bytes, bytes | None]] = []

    def set(self, name: bytes, value: bytes) -> FlakyPipeline:
        self.queued.append(("set", name, value))
        return self

    def get(self, name: bytes) -> FlakyPipeline:
        self.queued.append(("get", name, None))
        return self

    def execute(self) -> list[Any]:
        writes = any(op == "set" for op, _, _ in self.queued)
        self.engine._write() if writes else self.engine._weather()
        results: list[Any] = []
        for op, name, value in self.queued:
            if op == "set":
                assert value is not None
                self.engine.data[name] = value
                results.append(True)
            else:
                results.append(self.engine.data.get(name))
        self.queued = []
        return results


def target_of(cls: type[RedisBlockObjectStore], seed: int) -> Target:
    engines = random.Random(seed)

    def build(max_bytes: Any, object_nbytes: Any) -> RedisBlockObjectStore:
        return cls(max_bytes, object_nbytes, client=FlakyEngine(engines.randrange(2**32)))

    return Target(cls.__name__, build, None, frozenset({PYTHON, READ_INTO}))


# ----------------------------------------------------------- wrong stores


class ReturnsWhatItFound(RedisBlockObjectStore):
    """A read with an object missing returns the others (vLLM's old
    store returned b"" for a slot it had lost)."""

    def get_concatenated(self, keys: Any) -> bytes:
        self._check_open("get_concatenated")
        wanted = read_keys(keys)
        if not wanted:
            return b""
        values = self._client.mget([self._name(key) for key in wanted])
        return b"".join(value for value in values if value is not None)


class FirstWriteWins(RedisBlockObjectStore):
    """A put skips keys already stored (the in-process store's rule), so a
    re-put leaves the stale payload."""

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        batch = _checked(self, objects, retain_keys, release_keys)
        present = self._client.mget([self._name(key) for key in batch]) if batch else []
        fresh = [BlockObject(k, p) for (k, p), old in zip(batch.items(), present, strict=True) if old is None]
        super().put(fresh)


class FirstPayloadOfABatch(RedisBlockObjectStore):
    """A key repeated in one batch keeps its first payload, not its last."""

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        self._check_open("put")
        items = objects if isinstance(objects, str | bytes | int) else list(objects)  # a one-pass iterator, once
        _checked(self, items, retain_keys, release_keys)
        firsts: dict[str, Any] = {}
        for obj in items:
            firsts.setdefault(obj.key, obj)
        super().put(list(firsts.values()))


class OneKeyAtATime(RedisBlockObjectStore):
    """A put of one SET per object: refused for memory halfway, it leaves
    the first part of its batch behind."""

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        for key, payload in _checked(self, objects, retain_keys, release_keys).items():
            super().put([BlockObject(key, payload)])


class KeepsALocalIndex(RedisBlockObjectStore):
    """Reads are served from a local copy of what it put: an object comes
    back after the engine evicted it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.copies: dict[str, bytes] = {}

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        batch = _checked(self, objects, retain_keys, release_keys)
        super().put([BlockObject(key, payload) for key, payload in batch.items()])
        self.copies.update(batch)

    def get_concatenated(self, keys: Any) -> bytes:
        self._check_open("get_concatenated")
        wanted = read_keys(keys)
        if wanted and all(key in self.copies for key in wanted):
            return b"".join(self.copies[key] for key in wanted)
        return super().get_concatenated(wanted)


class NormalizesKeys(RedisBlockObjectStore):
    """Keys are NFC-normalised before they reach the engine: two distinct
    keys that look alike share one object (another's payload)."""

    def _names(self, keys: list[str]) -> list[bytes]:
        return super()._names([unicodedata.normalize("NFC", key) for key in keys])


class TruncatesKeys(RedisBlockObjectStore):
    """Keys are cut to 64 characters to keep the engine's keys short: long
    keys that differ only at the end alias."""

    def _names(self, keys: list[str]) -> list[bytes]:
        return super()._names([key[:64] for key in keys])


class WritesAsItReads(RedisBlockObjectStore):
    """read_into fetches one object at a time and writes each as it comes:
    a missing object fails the call with part of the buffer written."""

    def read_into(self, keys: Any, buffer: Any) -> int:
        self._check_open("read_into")
        wanted = read_keys(keys)
        try:
            view = memoryview(buffer)
        except TypeError:
            raise TypeError("not a buffer") from None
        if view.readonly or not view.c_contiguous:
            raise TypeError("not a writable C-contiguous buffer")
        view = view.cast("B")
        if len(wanted) * self.object_nbytes > view.nbytes:
            raise ValueError("buffer too small")
        for index, key in enumerate(wanted):
            value = self._client.get(self._name(key))
            if value is None:
                raise MissingKeyError(f"{key!r} is not stored")
            view[index * self.object_nbytes : (index + 1) * self.object_nbytes] = value
        return len(wanted) * self.object_nbytes


class ReadsAfterClose(RedisBlockObjectStore):
    """close() lets go of the connection but the store keeps answering reads."""

    def get_concatenated(self, keys: Any) -> bytes:
        closed, self._closed = self._closed, False
        try:
            return super().get_concatenated(keys)
        finally:
            self._closed = closed


class MissingAsEngineFault(RedisBlockObjectStore):
    """A missing object is reported as a generic runtime failure, not the
    documented BlockObjectStoreError."""

    def get_concatenated(self, keys: Any) -> bytes:
        try:
            return super().get_concatenated(keys)
        except BlockObjectStoreError as error:
            raise LookupError(str(error)) from None


class TornWhenHalfIsEvicted(RedisBlockObjectStore):
    """Objects are stored in two halves (to stay under a value-size limit);
    a read checks only that each first half is there, so an evicted second
    half gives a short, torn object."""

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        batch = _checked(self, objects, retain_keys, release_keys)
        halves: dict[bytes, bytes] = {}
        for name, payload in zip(self._names(list(batch)), batch.values(), strict=True):
            middle = len(payload) // 2
            halves[name + b"#0"], halves[name + b"#1"] = payload[:middle], payload[middle:]
        try:
            if halves:
                self._client.mset(halves)
        except redis.exceptions.OutOfMemoryError as error:
            raise CapacityError(str(error)) from error

    def get_concatenated(self, keys: Any) -> bytes:
        self._check_open("get_concatenated")
        wanted = read_keys(keys)
        names = [name + half for name in self._names(wanted) for half in (b"#0", b"#1")]
        values = self._client.mget(names) if names else []
        if any(value is None for value in values[::2]):
            raise MissingKeyError("an object is not stored")
        return b"".join(value or b"" for value in values)


class ContainsFromALocalIndex(RedisBlockObjectStore):
    """``key in store`` answers from a local set of the keys it put, so a key
    the engine evicted is still "in" the store (reads are right)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.index: set[str] = set()

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        batch = _checked(self, objects, retain_keys, release_keys)
        super().put([BlockObject(key, payload) for key, payload in batch.items()])
        self.index.update(batch)

    def __contains__(self, key: object) -> bool:
        self._check_open("__contains__")
        return key in self.index


class MissingAsAnyStoreError(RedisBlockObjectStore):
    """A missing object raised as the base ``BlockObjectStoreError``, not the
    ``MissingKeyError`` the profile documents (vLLM's base class, too wide:
    a caller cannot tell a missing object from a broken engine)."""

    def get_concatenated(self, keys: Any) -> bytes:
        try:
            return super().get_concatenated(keys)
        except MissingKeyError as error:
            raise BlockObjectStoreError(str(error)) from None


# ------------------------------------------------------- right, but different


class PipelinedPerKey(RedisBlockObjectStore):
    """One SET or GET per object inside one MULTI/EXEC transaction: a design
    unlike the shipped store's MSET/MGET, and as correct."""

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        batch = _checked(self, objects, retain_keys, release_keys)
        if not batch:
            return
        pipe = self._client.pipeline(transaction=True)
        for name, payload in zip(self._names(list(batch)), batch.values(), strict=True):
            pipe.set(name, payload)
        try:
            pipe.execute()
        except redis.exceptions.OutOfMemoryError as error:
            raise CapacityError(str(error)) from error

    def get_concatenated(self, keys: Any) -> bytes:
        self._check_open("get_concatenated")
        wanted = read_keys(keys)
        if not wanted:
            return b""
        pipe = self._client.pipeline(transaction=True)
        for name in self._names(wanted):
            pipe.get(name)
        values = pipe.execute()
        if any(value is None for value in values):
            raise MissingKeyError("an object is not stored")
        return b"".join(values)


class AsksTheEngineFirst(RedisBlockObjectStore):
    """read_into fetches before it checks the buffer, so a missing object wins
    over a short buffer, as in the in-process store: the profile allows both."""

    def read_into(self, keys: Any, buffer: Any) -> int:
        self._check_open("read_into")
        wanted = read_keys(keys)
        with memoryview(buffer) as view:  # a TypeError for what is no buffer, before the engine is asked
            usable = not view.readonly and view.c_contiguous
        if wanted and usable:
            self.get_concatenated(wanted)  # raises MissingKeyError first if one is gone
        return super().read_into(wanted, buffer)


RIGHT = (RedisBlockObjectStore, PipelinedPerKey, AsksTheEngineFirst)


def _checked(store: RedisBlockObjectStore, objects: Any, retain: Any, release: Any) -> dict[str, bytes]:
    """What the store itself checks first: open, then the batch (as strict)."""
    store._check_open("put")
    return check_batch(objects, retain, release, object_nbytes=store.object_nbytes).objects


WRONG = (
    ReturnsWhatItFound,
    FirstWriteWins,
    FirstPayloadOfABatch,
    OneKeyAtATime,
    KeepsALocalIndex,
    NormalizesKeys,
    TruncatesKeys,
    WritesAsItReads,
    ReadsAfterClose,
    MissingAsEngineFault,
    TornWhenHalfIsEvicted,
    ContainsFromALocalIndex,
    MissingAsAnyStoreError,
)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("right", RIGHT, ids=lambda cls: cls.__name__)
def test_a_right_store_conforms_on_an_engine_that_evicts_and_refuses(right: type, seed: int) -> None:
    report = search(target_of(right, seed), seed, max_traces=TRACES, max_seconds=600)
    print(report.render())
    assert report.violation is None, report.render()
    tally = report.tally
    assert tally.traces == TRACES
    # The engine really did evict under reads and refuse puts, and reads also succeeded.
    assert tally.reads_of_gone > 0 and tally.puts_refused > 0 and tally.read_hits > 0, tally


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("wrong", WRONG, ids=lambda cls: cls.__name__)
def test_a_wrong_remote_store_is_flagged(wrong: type[RedisBlockObjectStore], seed: int) -> None:
    report = search(target_of(wrong, seed), seed, max_traces=2000, max_seconds=600)
    assert report.violation is not None, f"{wrong.__name__} passed {report.tally.traces} traces at seed {seed}"
    print(f"{wrong.__name__} at seed {seed}: flagged after {report.tally.traces} traces\n{report.violation.render()}")


def test_a_trace_holds_no_call_from_inside_a_call() -> None:
    source = random.Random(0)
    forms = {getattr(op, "form", "list") for _ in range(300) for op in remote_trace(source.randbytes(96)).ops}
    assert "iter" in forms and not any(form.startswith("reenter") for form in forms)


def test_a_violation_names_the_calls_and_what_was_allowed() -> None:
    for data in (random.Random(n).randbytes(96) for n in range(2000)):
        trace = remote_trace(data)
        violation = judge(trace, target_of(ReturnsWhatItFound, 7))
        if violation is not None:
            break
    else:
        pytest.fail("ReturnsWhatItFound was never flagged")
    text = violation.render()
    assert "the remote profile allows only" in text and "get_concatenated" in text
    assert Err(Kind.MISSING) in violation.allowed


@pytest.mark.parametrize("seed", SEEDS)
def test_the_in_process_store_is_not_a_remote_store(seed: int) -> None:
    # Its releases need a retain (semantics.md, section 4) and its first write wins (section 3); a
    # remote store ignores pins (R4) and keeps the last successful put (R2). The search meets the first.
    def build(max_bytes: Any, object_nbytes: Any) -> Any:
        return BlockObjectStore(max_bytes=max_bytes, object_nbytes=object_nbytes)

    report = search(Target("BlockObjectStore", build, None, frozenset({PYTHON, READ_INTO})), seed, max_traces=2000)
    assert report.violation is not None
    assert report.violation.observed == "error unreferenced", report.violation.render()
    assert Ok() in report.violation.allowed


class BrokenEngine(FlakyEngine):
    """FlakyEngine whose connection drops for good after ``calls`` reads."""

    def __init__(self, seed: int, calls: int = 40) -> None:
        super().__init__(seed)
        self.left = calls

    def mget(self, names: list[bytes]) -> list[bytes | None]:
        self.left -= 1
        if self.left < 0:
            raise redis.exceptions.ConnectionError("Connection closed by server.")
        return super().mget(names)


@pytest.mark.parametrize("seed", SEEDS)
def test_an_engine_failure_is_no_outcome_and_no_verdict(seed: int) -> None:
    # The store turns the lost connection into an EngineError (a BlockObjectStoreError): the judge
    # once scored that read as "missing", an outcome the profile allows, and the run conformed.
    engines = random.Random(seed)

    def build(max_bytes: Any, object_nbytes: Any) -> RedisBlockObjectStore:
        return RedisBlockObjectStore(max_bytes, object_nbytes, client=BrokenEngine(engines.randrange(2**32), 5))

    report = search(Target("on a broken engine", build, None, frozenset({PYTHON, READ_INTO})), seed, max_traces=300)
    assert report.violation is None and report.ended_by == "engine failure", report.render()
    failure = report.engine_failure
    assert isinstance(failure, EngineFailure) and "EngineError: Redis failed a read" in failure.message
    assert "NOT JUDGED: the engine failed" in report.render()


def test_in_is_judged() -> None:
    # A Python store is driven with `key in store` (the profile's contains), and its answers are judged.
    source = random.Random(0)
    names = {op.name for _ in range(300) for op in remote_trace(source.randbytes(96)).ops}
    assert "contains" in names and not names & {"len", "stats", "flush", "enter", "exit"}, names
