"""``ReferenceStore``: the model behind the store's public API.

It is slow and obviously right: every call is one model step. Ports and the
production store are compared with it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Concatenate, ParamSpec, TypeVar

from auxspec.models import sequential as model
from auxspec.models.sequential import Err, Kind, Outcome, State
from auxspec.reference import binding
from auxstore import ReentrantCallError, StoreSnapshot, StoreStats

_P = ParamSpec("_P")
_R = TypeVar("_R")

# What every target's observable state is compared as (auxstore's type,
# named here so the engine needs no import of the store it judges).
Snapshot = StoreSnapshot

_MESSAGES: dict[Kind, str] = {
    Kind.CLOSED: "auxiliary output store is closed",
    # vLLM's phrases where vLLM has one (users search for them), then the detail.
    Kind.CAPACITY: "auxiliary output store cannot retain the requested batch: too few unpinned, unprotected keys",
    Kind.MISSING: (
        "auxiliary output object does not exist; the object may have been evicted or never put. "
        "Increase aux_output_config.max_bytes when a KV cache hit requires it"
    ),
    Kind.UNREFERENCED: "release of a key that holds no reference",
    Kind.PAYLOAD: "payload length differs from object_nbytes",
    Kind.TYPE: "keys must be str, payloads and buffers bytes-like, key lists and batches iterable",
    Kind.BUFFER: "buffer is smaller than the objects read",
    Kind.CONFIG: (
        "auxiliary output object size must be positive, and the auxiliary output store must fit at least one "
        "object: need object_nbytes > 0 and max_bytes >= object_nbytes"
    ),
}


def _one_call_at_a_time(
    method: Callable[Concatenate[ReferenceStore, _P], _R],
) -> Callable[Concatenate[ReferenceStore, _P], _R]:
    """A call made while another call of the same store runs (from a key, a
    payload, an iterable it uses) raises ReentrantCallError and changes
    nothing; the running call goes on. As ``BlockObjectStore`` does."""

    @functools.wraps(method)
    def guarded(self: ReferenceStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        running = self._running
        if self._state.closed and running is None and method.__name__ != "close":
            self._apply(model.flush(self._state))  # closed: fail before any caller code runs, as the store does
        if running is not None:
            raise ReentrantCallError(
                f"{method.__name__}() was called while {running}() is running on the same store; "
                f"a store's calls cannot nest"
            )
        self._running = method.__name__
        try:
            return method(self, *args, **kwargs)
        finally:
            self._running = None

    return guarded


def _by_value(key: model.KeyArg) -> model.KeyArg:
    """A str subclass key as its plain str value, as the store takes it (so no
    caller code runs inside a model step); one that cannot be hashed is invalid."""
    if type(key) is str or not isinstance(key, str):
        return key
    try:
        hash(key)
    except Exception:
        return model.Invalid(f"key of type {type(key).__name__} that cannot be hashed")
    return str.__str__(key)


class ReferenceStore:
    """The executable reference of ``BlockObjectStore`` for either profile."""

    def __init__(self, *, max_bytes: int, object_nbytes: int, profile: str = "strict") -> None:
        if profile not in model.PROFILES:  # a parameter of the spec, not an input it models
            raise ValueError(f"unknown profile {profile!r}; use one of {', '.join(model.PROFILES)}")
        created = model.new(binding.as_size(max_bytes), binding.as_size(object_nbytes), profile)
        if isinstance(created, Err):
            raise binding.exception_for(
                created.kind,
                profile,
                f"{'sizes must be ints' if created.kind is Kind.TYPE else _MESSAGES[created.kind]} "
                f"(max_bytes={max_bytes!r}, object_nbytes={object_nbytes!r})",
            )
        self._state: State = created
        self._running: str | None = None  # the call running, if any

    # The model state, for tests and drivers that compare whole states.
    @property
    def state(self) -> State:
        return self._state

    @property
    def object_nbytes(self) -> int:
        return self._state.object_nbytes

    def __repr__(self) -> str:
        state = self._state
        head = (
            f"ReferenceStore(profile={state.profile!r}, capacity={state.capacity}, "
            f"object_nbytes={state.object_nbytes}"
        )
        if state.closed:
            return f"{head}, closed)"
        counts = dict(state.refs)
        pinned = sum(key in counts for key, _ in state.entries)
        return f"{head}, stored={len(state.entries)}, pinned={pinned}, referenced={len(counts)})"

    @property
    def capacity(self) -> int:
        return self._state.capacity

    def _apply(self, result: tuple[State, Outcome], detail: str = "") -> model.Value:
        self._state, outcome = result
        if isinstance(outcome, Err):
            message = _MESSAGES[outcome.kind] + (f": {detail}" if detail else "")
            raise binding.exception_for(outcome.kind, self._state.profile, message)
        return outcome.value

    @_one_call_at_a_time
    def put(
        self,
        objects: Iterable[object],
        *,
        retain_keys: Iterable[str] = (),
        release_keys: Iterable[str] = (),
    ) -> None:
        items = tuple((_by_value(key), payload) for key, payload in binding.as_items(objects))
        retains = tuple(map(_by_value, binding.as_keys(retain_keys)))
        releases = tuple(map(_by_value, binding.as_keys(release_keys)))
        result = model.put(self._state, items, retains, releases)
        outcome = result[1]
        detail = self._put_detail(outcome.kind, items, retains, releases) if isinstance(outcome, Err) else ""
        self._apply(result, detail)

    def _put_detail(
        self,
        kind: Kind,
        items: tuple[model.Item, ...],
        retains: tuple[model.KeyArg, ...],
        releases: tuple[model.KeyArg, ...],
    ) -> str:
        """What to name in the message: the offending value, where there is one."""
        if kind is Kind.CAPACITY:
            return f"limit={self._state.capacity} objects"
        if kind is Kind.TYPE:
            flat = [v for pair in items for v in pair] + list(retains + releases)
            return next(v.what for v in flat if isinstance(v, model.Invalid))
        if kind is Kind.PAYLOAD:
            size = self._state.object_nbytes
            key, payload = next((k, p) for k, p in items if isinstance(p, bytes) and len(p) != size)
            return f"payload of {key!r} is {len(payload)} bytes, object_nbytes is {size}"
        if kind is Kind.UNREFERENCED:
            counts = dict(self._state.refs)
            for key in retains:
                counts[str(key)] = counts.get(str(key), 0) + 1
            for key in releases:
                counts[str(key)] = counts.get(str(key), 0) - 1
                if counts[str(key)] < 0:
                    return f"{key!r} holds no reference"
        return ""

    @_one_call_at_a_time
    def get_concatenated(self, keys: list[str]) -> bytes:
        wanted = tuple(map(_by_value, binding.as_keys(keys)))
        value = self._apply(model.get_concatenated(self._state, wanted), self._missing_detail(wanted))
        assert isinstance(value, bytes)  # a successful read always has a value
        return value

    @_one_call_at_a_time
    def read_into(self, keys: list[str], buffer: object) -> int:
        """Write the concatenated payloads of ``keys`` at the start of ``buffer``
        (any writable buffer); return the number of bytes written."""
        wanted = tuple(map(_by_value, binding.as_keys(keys)))
        view = binding.as_buffer(buffer)
        nbytes = view if isinstance(view, model.Invalid) else view.nbytes
        result = model.read_into(self._state, wanted, nbytes)
        try:
            data = self._apply(result, self._missing_detail(wanted))
            assert isinstance(data, bytes) and isinstance(view, memoryview)
            view[: len(data)] = data
            return len(data)
        finally:
            if isinstance(view, memoryview):
                view.release()

    def _missing_detail(self, keys: tuple[model.KeyArg, ...]) -> str:
        stored = set(model.stored_keys(self._state))
        missing = [k for k in keys if isinstance(k, str) and k not in stored]
        return f"{missing[0]!r}" if missing else ""

    @_one_call_at_a_time
    def flush(self) -> None:
        """Nothing is pending in a synchronous store; only a closed store fails."""
        self._apply(model.flush(self._state))

    @_one_call_at_a_time
    def close(self) -> None:
        self._apply(model.close(self._state))

    def __enter__(self) -> ReferenceStore:
        self.flush()  # entering a closed store is a call on it, and fails
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @_one_call_at_a_time
    def __len__(self) -> int:
        value = self._apply(model.length(self._state))
        assert isinstance(value, int)
        return value

    @_one_call_at_a_time
    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is stored; recency does not change."""
        return bool(self._apply(model.contains(self._state, _by_value(binding.as_key(key)))))

    @_one_call_at_a_time
    def stats(self) -> StoreStats:
        value = self._apply(model.stats(self._state))
        assert isinstance(value, model.Stats)
        return StoreStats(**vars(value))

    def snapshot(self) -> StoreSnapshot:
        """Everything observable, without touching recency (also after close)."""
        return observe(self._state)


def observe(state: State) -> StoreSnapshot:
    """The snapshot of a model state, in the shape every target reports."""
    return StoreSnapshot(entries=state.entries, references=state.refs, closed=state.closed)
