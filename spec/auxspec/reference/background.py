"""``ReferenceBackgroundStore``: the background model behind the public API,
run on the calling thread (the writer steps when told to, or eagerly)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from types import TracebackType

from auxspec.models import sequential as model
from auxspec.models.background import (
    FAULT,
    Batch,
    BgOutcome,
    BgState,
    Latched,
    close,
    enter,
    flush,
    get_concatenated,
    new_background,
    observe_inner,
    put,
    read_into,
    writer_step,
)
from auxspec.models.sequential import Err, Invalid, Kind, Ok, State
from auxspec.reference import binding
from auxspec.reference.store import ReferenceStore, observe
from auxstore import BlockObjectStoreError, StoreSnapshot, StoreStats

# ---------------------------------------------------------- the sequential reference


_LATCHED_MESSAGE = "a background write failed; the store stays failed"


def batch_of(objects: object, retain_keys: object, release_keys: object) -> Batch:
    """The model batch for a put's Python arguments (a snapshot of them)."""
    return Batch(binding.as_items(objects), binding.as_keys(retain_keys), binding.as_keys(release_keys))


class ReferenceBackgroundStore:
    """The executable reference of ``BackgroundBlockObjectStore``: the model's
    steps behind the public API, run on the calling thread.

    ``store_or_params`` is the inner store: a ``ReferenceStore`` (its current
    state is taken; use this object from then on), a model ``State``, or the
    ``ReferenceStore`` keyword arguments (``max_bytes``, ``object_nbytes``).
    With ``eager`` (the default) the writer runs to idle after every call, so
    a put reports its own batch's failure at once; otherwise batches wait
    until ``writer_step``/``run_writer``, a draining call, or a put that
    would block on a full queue (which runs the writer one batch, as the real
    owner waits for it).
    """

    def __init__(
        self,
        store_or_params: ReferenceStore | State | Mapping[str, int],
        *,
        max_pending_batches: int,
        profile: str | None = None,
        eager: bool = True,
    ) -> None:
        if isinstance(store_or_params, ReferenceStore):
            inner = store_or_params.state
        elif isinstance(store_or_params, State):
            inner = store_or_params
        else:
            inner = ReferenceStore(**store_or_params, profile=profile or "strict").state
        if profile is not None and profile != inner.profile:
            raise ValueError(f"profile {profile!r} differs from the inner store's {inner.profile!r}")
        created = new_background(inner, binding.as_size(max_pending_batches))
        if isinstance(created, Err):
            raise binding.exception_for(
                created.kind, inner.profile, f"max_pending_batches must be an int >= 1, got {max_pending_batches!r}"
            )
        self._state = created
        self._eager = eager
        self._cause: BaseException | None = None

    @property
    def state(self) -> BgState:
        return self._state

    @property
    def object_nbytes(self) -> int:
        return self._state.inner.object_nbytes

    @property
    def pending(self) -> int:
        """Batches queued and not yet applied."""
        return len(self._state.queue)

    def writer_step(self) -> None:
        """Apply the head batch; nothing to do on an idle writer."""
        if self._state.queue:
            self._state = writer_step(self._state)

    def run_writer(self, batches: int | None = None) -> int:
        """Apply up to ``batches`` queued batches (all when None); return how many."""
        done = 0
        while self._state.queue and (batches is None or done < batches):
            self.writer_step()
            done += 1
        return done

    def _raise(self, outcome: BgOutcome) -> None:
        if isinstance(outcome, Err):
            raise binding.exception_for(outcome.kind, self._state.profile, f"background store: {outcome.kind.value}")
        if isinstance(outcome, Latched):
            if self._cause is None:
                self._cause = _cause_exception(outcome.cause, self._state.profile)
            raise BlockObjectStoreError(_LATCHED_MESSAGE) from self._cause

    def put(
        self,
        objects: Iterable[object],
        *,
        retain_keys: Iterable[str] = (),
        release_keys: Iterable[str] = (),
    ) -> None:
        batch = batch_of(objects, retain_keys, release_keys)
        alternatives = put(self._state, batch)
        while not alternatives:  # full: the owner waits for the writer to take a batch
            self.writer_step()
            alternatives = put(self._state, batch)
        self._state, outcome = alternatives[0]
        if self._eager and outcome == Ok():
            self.run_writer()
            error = self._state.error
            if error is not None and not self._state.seen:
                self._state = replace(self._state, seen=True)
                outcome = Latched(error)
        self._raise(outcome)

    def _drained(self) -> None:
        if not (self._state.closed and self._state.profile == "strict"):
            self.run_writer()

    def get_concatenated(self, keys: list[str]) -> bytes:
        self._drained()
        wanted = binding.as_keys(keys)
        self._state, outcome = get_concatenated(self._state, wanted)
        self._raise(outcome)
        assert isinstance(outcome, Ok) and isinstance(outcome.value, bytes)
        return outcome.value

    def read_into(self, keys: list[str], buffer: object) -> int:
        self._drained()
        wanted = binding.as_keys(keys)
        view = binding.as_buffer(buffer)
        try:
            nbytes = view if isinstance(view, Invalid) else view.nbytes
            self._state, outcome = read_into(self._state, wanted, nbytes)
            self._raise(outcome)
            assert isinstance(outcome, Ok) and isinstance(outcome.value, bytes) and isinstance(view, memoryview)
            view[: len(outcome.value)] = outcome.value
            return len(outcome.value)
        finally:
            if isinstance(view, memoryview):
                view.release()

    def flush(self) -> None:
        self._drained()
        self._state, outcome = flush(self._state)
        self._raise(outcome)

    def close(self) -> None:
        if not self._state.closed:
            self.run_writer()
        self._state, outcome = close(self._state)
        self._raise(outcome)

    def __enter__(self) -> ReferenceBackgroundStore:
        self._state, outcome = enter(self._state)
        self._raise(outcome)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _observed(self, step: Callable[[State], tuple[State, model.Outcome]]) -> model.Value:
        """``len``, ``in`` or ``stats``: ``step`` on the inner store once the queue is drained."""
        self._drained()
        self._state, outcome = observe_inner(self._state)
        self._raise(outcome)
        answer = step(self._state.inner)[1]
        assert isinstance(answer, Ok)  # the inner store is open: observe_inner said so
        return answer.value

    def __len__(self) -> int:
        value = self._observed(model.length)
        assert isinstance(value, int)
        return value

    def __contains__(self, key: object) -> bool:
        return bool(self._observed(lambda inner: model.contains(inner, binding.as_key(key))))

    def stats(self) -> StoreStats:
        value = self._observed(model.stats)
        assert isinstance(value, model.Stats)
        return StoreStats(**vars(value))

    def snapshot(self) -> StoreSnapshot:
        """The inner store as it is now (queued batches not applied), without
        touching recency."""
        return observe(self._state.inner)


def _cause_exception(cause: str, profile: str) -> BaseException:
    if cause == FAULT:
        return RuntimeError("the inner store failed")
    return binding.exception_for(Kind(cause), profile, f"background write failed: {cause}")

