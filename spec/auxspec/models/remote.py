"""The ``remote`` profile: a store whose capacity an outside engine manages.

vLLM's later stores (``MooncakeBlockObjectStore``, ``ShmBlockObjectStore``)
keep no LRU and no reference counts of their own: objects go to an engine
(Mooncake Store, shared memory; here also Redis) that evicts whatever it
likes, whenever it likes. So the model cannot say which objects are still
stored, only what a caller may observe. It is nondeterministic: any object
may vanish between two calls, and each call returns ``Allowed``, every
outcome the profile permits, each with the state it leaves. A judge keeps the
branch whose outcome it observed (``Allowed.after``); an outcome with no
branch breaks the profile.

The state is what the calls observed so far, in a form that is exact and
small: ``objects`` holds every key that may still be stored, with the
payload of its last successful put; a key not there is certainly gone (never
put, or seen missing). ``gone`` holds what failed reads taught: each entry is
a set of keys at least one of which is gone, though the failure did not say
which (a read fails whole). Once gone, an object stays gone until it is put
again (an engine never brings an object back), so a later successful read of
keys rules them out of every such set; a set left with one key means that
key is gone; a set left empty is a contradiction, so that outcome is not
allowed. tests/test_remote_model.py checks this summary against the set of
every possible engine content, computed by brute force.

The rules (docs/semantics.md, "The remote profile", gives each its source):

- R1 a read returns every requested object, joined in order, each with the
  payload of its last successful put, or fails whole with ``MISSING`` and
  returns nothing; any non-empty read may fail (anything may be evicted);
- R2 a put stores its whole batch (de-duplicated as a dict: last payload
  wins) and a later put of a key replaces its payload; or it fails whole
  with ``CAPACITY`` (the engine refused it) and changes nothing;
- R3 an object never comes back after it was seen gone, unless put again,
  and never comes back with another object's payload or torn;
- R4 pins (``retain_keys``, ``release_keys``) are checked for type and
  otherwise ignored: they neither protect an object from the engine nor
  remove it, and releasing a key never retained is not an error;
- R5 invalid input fails as ``strict`` does, before any change; a closed
  store refuses every call but ``close`` (idempotent).
- R6 ``key in store`` (``contains``) may answer False at any time, and the
  key is then gone; True only while the key may still be stored;
- R7 (the judge's, drivers.remote.classify) only the documented errors are
  outcomes: ``MissingKeyError`` for reads, ``CapacityError`` for puts; an
  engine failure is no outcome at all.

One option, for engines that publish a batch key by key or chunk by chunk
(Mooncake Store; vLLM's ``MooncakeBlockObjectStore`` splits a batch over
``max_batch_bytes``): ``partial_puts``. Then a put refused with ``CAPACITY``
may have published part of its batch (R2 holds for a success only), so each
of its keys may afterwards hold its new payload, its old one, or be gone.
``maybe`` records the other payloads a key may hold; a successful read
tells which one it holds. A judge takes the option with
``with remote.partial_puts(): ...`` (``new`` reads it), so the plain profile
keeps its whole-batch rule for engines that have it (Redis).

A second option, ``transient_misses`` (``with remote.transient_misses():``):
a read may fail though every object it named is stored (Mooncake drops a
transfer that outlived the lease its read was granted, and reports the
object as missing). Then a failed read teaches nothing: R3's "seen gone"
comes only from ``in`` answering False.

``len()`` and ``stats()`` are not part of the profile: the engine is shared,
so no client can count what it holds.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace

from auxspec.models.sequential import Err, Invalid, Item, KeyArg, Kind, Ok, Outcome, validate_put

__all__ = [
    "PROFILE",
    "Allowed",
    "Err",
    "Invalid",
    "Kind",
    "Ok",
    "State",
    "check",
    "close",
    "contains",
    "get_concatenated",
    "new",
    "partial_puts",
    "put",
    "read_into",
    "transient_misses",
    "violations",
]

PROFILE = "remote"

# Whether the stores built now publish a refused batch in part (see the module's docstring).
_PARTIAL_PUTS: ContextVar[bool] = ContextVar("partial_puts", default=False)
# Whether a read of the stores built now may fail though its objects are stored.
_TRANSIENT_MISSES: ContextVar[bool] = ContextVar("transient_misses", default=False)


@contextlib.contextmanager
def partial_puts() -> Iterator[None]:
    """Judge the stores built inside this block with the ``partial_puts``
    option: a put refused for room may have published part of its batch."""
    token = _PARTIAL_PUTS.set(True)
    try:
        yield
    finally:
        _PARTIAL_PUTS.reset(token)


@contextlib.contextmanager
def transient_misses() -> Iterator[None]:
    """Judge the stores built inside this block with the ``transient_misses``
    option: a read may fail though every object it named is stored."""
    token = _TRANSIENT_MISSES.set(True)
    try:
        yield
    finally:
        _TRANSIENT_MISSES.reset(token)


@dataclass(frozen=True)
class State:
    """What the calls so far allow the engine to hold.

    ``objects``: the keys that may still be stored, sorted, each with the
    payload of its last successful put. ``gone``: sorted tuples of at least
    two keys of ``objects``, at least one of which is no longer stored; none
    is a subset of another (that one would say more). ``maybe``: keys of
    ``objects``, sorted, each with the other payloads (sorted) it may hold
    instead, left by puts refused with ``partial_puts`` (empty without it).
    """

    object_nbytes: int
    objects: tuple[tuple[str, bytes], ...] = ()
    gone: tuple[tuple[str, ...], ...] = ()
    closed: bool = False
    partial: bool = False  # the partial_puts option
    transient: bool = False  # the transient_misses option
    maybe: tuple[tuple[str, tuple[bytes, ...]], ...] = ()


@dataclass(frozen=True)
class Allowed:
    """Every outcome a call may have, each with the state it leaves."""

    branches: tuple[tuple[Outcome, State], ...]

    def outcomes(self) -> tuple[Outcome, ...]:
        return tuple(outcome for outcome, _ in self.branches)

    def after(self, observed: Outcome) -> State | None:
        """The state after ``observed``, or None if the profile does not allow it."""
        for outcome, state in self.branches:
            if outcome == observed:
                return state
        return None


# --------------------------------------------------------------------- invariant


def violations(state: State) -> list[str]:
    """Every way ``state`` breaks the state invariant (empty when it holds)."""
    found: list[str] = []
    if state.object_nbytes < 1:
        found.append(f"object_nbytes {state.object_nbytes} < 1")
    keys = [key for key, _ in state.objects]
    if keys != sorted(set(keys)):
        found.append("object keys are not unique and sorted")
    for key, payload in state.objects:
        if type(payload) is not bytes or len(payload) != state.object_nbytes:
            found.append(f"payload of {key!r} is not {state.object_nbytes} bytes")
    if list(state.gone) != sorted(set(state.gone)):
        found.append("gone sets are not unique and sorted")
    for members in state.gone:
        if len(members) < 2 or list(members) != sorted(set(members)):
            found.append(f"gone set {members!r} is not two or more sorted keys")
        if any(key not in keys for key in members):
            found.append(f"gone set {members!r} names a key that is certainly gone")
    for a in state.gone:
        for b in state.gone:
            if a != b and set(a) <= set(b):
                found.append(f"gone set {b!r} is implied by {a!r}")
    if state.closed and (state.objects or state.gone or state.maybe):
        found.append("a closed store still holds data")
    if state.maybe and not state.partial:
        found.append("other payloads are possible without partial_puts")
    stored = dict(state.objects)
    if [key for key, _ in state.maybe] != sorted({key for key, _ in state.maybe}):
        found.append("maybe keys are not unique and sorted")
    for key, others in state.maybe:
        if key not in stored:
            found.append(f"maybe names {key!r}, which is certainly gone")
        if not others or list(others) != sorted(set(others)) or stored.get(key) in others:
            found.append(f"other payloads of {key!r} are not distinct, sorted, non-empty and new")
        if any(type(p) is not bytes or len(p) != state.object_nbytes for p in others):
            found.append(f"another payload of {key!r} is not {state.object_nbytes} bytes")
    return found


def check(state: State) -> bool:
    """True when ``state`` satisfies the state invariant."""
    return not violations(state)


def _normal(state: State, objects: dict[str, bytes], gone: list[set[str]]) -> State | None:
    """``state`` holding ``objects`` and ``gone`` in normal form, or None when
    ``gone`` is contradictory (a set whose keys were all seen stored)."""
    pending = [members for members in gone if members <= set(objects)]  # a certainly-gone member satisfies its set
    while True:
        if any(not members for members in pending):
            return None
        single = next((members for members in pending if len(members) == 1), None)
        if single is None:
            break
        (key,) = single
        del objects[key]
        pending = [members for members in pending if key not in members]
    unique = {tuple(sorted(members)) for members in pending}
    least = sorted(a for a in unique if not any(b != a and set(b) <= set(a) for b in unique))
    maybe = tuple(entry for entry in state.maybe if entry[0] in objects)
    return replace(state, objects=tuple(sorted(objects.items())), gone=tuple(least), maybe=maybe)


def _candidates(state: State, key: str) -> tuple[bytes, ...]:
    """Every payload ``key`` (a key of ``objects``) may hold."""
    return (dict(state.objects)[key], *dict(state.maybe).get(key, ()))


def _pinned(state: State, payloads: dict[str, bytes]) -> State:
    """``state`` once each key of ``payloads`` was read with that payload."""
    objects = dict(state.objects)
    objects.update(payloads)
    maybe = tuple(entry for entry in state.maybe if entry[0] not in payloads)
    return replace(state, objects=tuple(sorted(objects.items())), maybe=maybe)


def _seen_stored(state: State, keys: set[str]) -> State | None:
    """``state`` once ``keys`` were all observed stored (R3: so they were
    stored all along), or None if that contradicts what was seen before."""
    objects = dict(state.objects)
    if not keys <= set(objects):
        return None
    return _normal(state, objects, [set(members) - keys for members in state.gone])


def _seen_missing(state: State, keys: set[str]) -> State:
    """``state`` once a read of ``keys`` failed: at least one of them is gone."""
    objects = dict(state.objects)
    gone = [set(members) for members in state.gone]
    if keys <= set(objects):
        gone.append(set(keys))
    found = _normal(state, objects, gone)
    assert found is not None  # a non-empty new set contradicts nothing
    return found


# ----------------------------------------------------------------- construction


def new(max_bytes: int | Invalid, object_nbytes: int | Invalid) -> State | Err:
    """The store with nothing put yet, or why the arguments are rejected (as ``strict``).

    ``max_bytes`` bounds nothing the profile can observe (the engine decides
    what fits); it is checked as ``strict`` checks it, so a store can drop in.

    post: isinstance(__return__, Err) or check(__return__)
    post: isinstance(__return__, Err) or __return__.objects == ()
    """
    if isinstance(max_bytes, Invalid) or isinstance(object_nbytes, Invalid):
        return Err(Kind.TYPE)
    if object_nbytes <= 0 or max_bytes < object_nbytes:
        return Err(Kind.CONFIG)
    return State(object_nbytes=object_nbytes, partial=_PARTIAL_PUTS.get(), transient=_TRANSIENT_MISSES.get())


# -------------------------------------------------------------------------- put


def put(
    state: State,
    objects: tuple[Item, ...],
    retain: tuple[KeyArg, ...] = (),
    release: tuple[KeyArg, ...] = (),
) -> Allowed:
    """The whole batch is stored, or nothing is (R2; with ``partial_puts``
    a refused batch may be stored in part); pins are ignored (R4).

    pre: check(state)
    post: all(check(after) for _, after in __return__.branches)
    post: _put_is_whole(state, objects, __return__)
    post: _put_failures_are_justified(state, objects, retain, release, __return__)
    """
    if state.closed:
        return Allowed(((Err(Kind.CLOSED), state),))
    valid = validate_put(state.object_nbytes, objects, retain, release)
    if isinstance(valid, Kind):
        return Allowed(((Err(valid), state),))
    batch = dict(valid[0])
    if not batch:
        return Allowed(((Ok(), state),))
    stored = dict(state.objects)
    stored.update(batch)
    # A set naming a key put again says nothing any more: that key may have been the one gone.
    gone = [set(members) for members in state.gone if not set(members) & set(batch)]
    after = _normal(replace(state, maybe=tuple(e for e in state.maybe if e[0] not in batch)), stored, gone)
    assert after is not None
    return Allowed(((Ok(), after), (Err(Kind.CAPACITY), _refused(state, batch) if state.partial else state)))


def _refused(state: State, batch: dict[str, bytes]) -> State:
    """``state`` after a put of ``batch`` was refused, part of it perhaps published."""
    objects = dict(state.objects)
    maybe = {key: set(others) for key, others in state.maybe}
    for key, payload in batch.items():
        if key not in objects:
            objects[key] = payload  # certainly gone before: now gone, or this payload
        elif objects[key] != payload:
            maybe.setdefault(key, set()).add(payload)
    gone = [set(members) for members in state.gone if not set(members) & set(batch)]
    shaped = replace(state, maybe=tuple((key, tuple(sorted(maybe[key]))) for key in sorted(maybe)))
    after = _normal(shaped, objects, gone)
    assert after is not None
    return after


# ------------------------------------------------------------------------ reads


def get_concatenated(state: State, keys: tuple[KeyArg, ...]) -> Allowed:
    """Every object with its last payload, joined in order, or ``MISSING`` (R1, R3).

    pre: check(state)
    post: all(check(after) for _, after in __return__.branches)
    post: _read_is_exact(state, keys, None, __return__)
    post: _reads_learn_only(state, __return__)
    """
    return _read(state, keys, None)


def read_into(state: State, keys: tuple[KeyArg, ...], buffer_nbytes: int | Invalid) -> Allowed:
    """``get_concatenated`` into a caller's buffer of ``buffer_nbytes`` bytes;
    a buffer too short for every object is ``BUFFER`` (whether the store
    looks at the engine first or not: it may also be ``MISSING``).

    pre: check(state)
    pre: isinstance(buffer_nbytes, Invalid) or buffer_nbytes >= 0
    post: all(check(after) for _, after in __return__.branches)
    post: _read_is_exact(state, keys, buffer_nbytes, __return__)
    post: _reads_learn_only(state, __return__)
    """
    return _read(state, keys, buffer_nbytes)


def _read(state: State, keys: tuple[KeyArg, ...], buffer_nbytes: int | Invalid | None) -> Allowed:
    if state.closed:
        return Allowed(((Err(Kind.CLOSED), state),))
    if any(isinstance(key, Invalid) for key in keys) or isinstance(buffer_nbytes, Invalid):
        return Allowed(((Err(Kind.TYPE), state),))
    wanted = [key for key in keys if isinstance(key, str)]
    if not wanted:
        return Allowed(((Ok(b""), state),))
    branches: list[tuple[Outcome, State]] = []
    short = buffer_nbytes is not None and buffer_nbytes < state.object_nbytes * len(wanted)
    if short:
        branches.append((Err(Kind.BUFFER), state))
    else:
        found = _seen_stored(state, set(wanted))
        if found is not None:
            distinct = sorted(set(wanted))
            for choice in itertools.product(*(_candidates(state, key) for key in distinct)):
                payloads = dict(zip(distinct, choice, strict=True))
                branches.append((Ok(b"".join(payloads[key] for key in wanted)), _pinned(found, payloads)))
    branches.append((Err(Kind.MISSING), state if state.transient else _seen_missing(state, set(wanted))))
    return Allowed(tuple(branches))


def contains(state: State, key: KeyArg) -> Allowed:
    """``key in store``: True only while it may still be stored; False at any time.

    pre: check(state)
    post: all(check(after) for _, after in __return__.branches)
    post: _reads_learn_only(state, __return__)
    post: state.closed or (Ok(True) in __return__.outcomes()) == (_seen_stored(state, {str(key)}) is not None)
    """
    if state.closed:
        return Allowed(((Err(Kind.CLOSED), state),))
    if isinstance(key, Invalid):
        return Allowed(((Ok(False), state),))
    branches: list[tuple[Outcome, State]] = []
    found = _seen_stored(state, {key})
    if found is not None:
        branches.append((Ok(True), found))
    stored = dict(state.objects)
    stored.pop(key, None)
    gone = [set(members) for members in state.gone]
    after = _normal(state, stored, gone)
    assert after is not None
    branches.append((Ok(False), after))
    return Allowed(tuple(branches))


# ------------------------------------------------------------------------ close


def close(state: State) -> Allowed:
    """Closing forgets everything; closing again is a no-op (R5).

    pre: check(state)
    post: __return__.outcomes() == (Ok(),)
    post: all(after.closed and check(after) for _, after in __return__.branches)
    """
    closed = State(state.object_nbytes, closed=True, partial=state.partial, transient=state.transient)
    return Allowed(((Ok(), closed),))


# ------------------------------------------------------------------- contracts


def _put_is_whole(old: State, objects: tuple[Item, ...], allowed: Allowed) -> bool:
    """R2: success stores every batch key with its last batch payload and keeps
    every other key's payload; failure changes nothing."""
    for outcome, new in allowed.branches:
        if isinstance(outcome, Err):
            if new != old and not (old.partial and outcome == Err(Kind.CAPACITY)):
                return False
            continue
        batch = {key: payload for key, payload in objects if isinstance(key, str) and isinstance(payload, bytes)}
        after, before = dict(new.objects), dict(old.objects)
        if any(after.get(key) != payload for key, payload in batch.items()):
            return False
        if any(key not in batch and before.get(key) != payload for key, payload in after.items()):
            return False
    return True


def _put_failures_are_justified(
    old: State, objects: tuple[Item, ...], retain: tuple[KeyArg, ...], release: tuple[KeyArg, ...], allowed: Allowed
) -> bool:
    """Each refusal has its cause; an open store may always refuse a valid,
    non-empty batch for room, and a valid put may always succeed."""
    invalid = validate_put(old.object_nbytes, objects, retain, release)
    kinds = {outcome.kind for outcome in allowed.outcomes() if isinstance(outcome, Err)}
    succeeds = Ok() in allowed.outcomes()
    if old.closed:
        return kinds == {Kind.CLOSED} and not succeeds
    if isinstance(invalid, Kind):
        return kinds == {invalid} and not succeeds
    return succeeds and kinds == ({Kind.CAPACITY} if invalid[0] else set())


def _read_is_exact(
    old: State, keys: tuple[KeyArg, ...], buffer_nbytes: int | Invalid | None, allowed: Allowed
) -> bool:
    """R1: a success is every payload joined in order; a failure is always
    possible for a non-empty valid read of an open store; success is possible
    exactly when what was seen lets every key still be stored."""
    outcomes = allowed.outcomes()
    if old.closed:
        return outcomes == (Err(Kind.CLOSED),)
    if any(isinstance(key, Invalid) for key in keys) or isinstance(buffer_nbytes, Invalid):
        return outcomes == (Err(Kind.TYPE),)
    wanted = [key for key in keys if isinstance(key, str)]
    if not wanted:
        return outcomes == (Ok(b""),)
    stored = dict(old.objects)
    short = buffer_nbytes is not None and buffer_nbytes < old.object_nbytes * len(wanted)
    possible = all(key in stored for key in wanted) and not any(set(m) <= set(wanted) for m in old.gone)
    successes = [outcome for outcome in outcomes if isinstance(outcome, Ok)]
    if Err(Kind.MISSING) not in outcomes or (Err(Kind.BUFFER) in outcomes) != short:
        return False
    if short or not possible:
        return not successes
    distinct = sorted(set(wanted))
    joined = set()
    for choice in itertools.product(*(_candidates(old, key) for key in distinct)):
        payloads = dict(zip(distinct, choice, strict=True))
        joined.add(Ok(b"".join(payloads[key] for key in wanted)))
    return len(successes) == len(joined) and set(successes) == joined


def _reads_learn_only(old: State, allowed: Allowed) -> bool:
    """R3: an observation never adds an object nor a payload it could not
    hold; it only rules keys and payloads out (the engine never brings an
    object back)."""
    before = dict(old.objects)
    return all(
        all(key in before and payload in _candidates(old, key) for key, payload in new.objects)
        for _, new in allowed.branches
    )
