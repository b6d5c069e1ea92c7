"""A trace as the views a learner steps through, computed with the model.

``timeline(trace)`` is a pure function: for each op, the store before and
after it and, inside a put, the store after each of the model's phases (pins,
batch, terminal moves, eviction), with the keys each phase touched, what was
evicted and why, and the outcome. The phases call the model's own step
functions (``model.apply_pins``, ``place_batch``, ``move_terminal``,
``choose_victims``); the state after the op is the one ``engine.table.step``
returns, so a view cannot drift from the spec.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import chain, islice
from typing import cast

from auxspec.engine.fields import model_items, model_keys
from auxspec.engine.ops import BAD_OBJECT, REENTRANT_FORMS, Bad, Get, KeyList, Op, Put, ReadInto, Trace
from auxspec.engine.table import describe, kind_of
from auxspec.engine.table import step as spec_step
from auxspec.models import sequential as model
from auxspec.models.background import OwnerCall
from auxspec.models.sequential import Err, Kind, Ok, Outcome, State, UndefinedInput
from auxspec.reference.binding import as_size

# What a slot may be tagged with, and the mark plain text draws for it.
NEW = "new"  # inserted by this put
MOVED = "moved"  # a batch key that was stored already: moved to the most-recent end
PROTECTED = "protected"  # a batch key this put protects from eviction
TERMINAL = "terminal"  # released to zero in this put: moved to the most-recent end
READ = "read"  # read by this call: moved to the most-recent end
EVICTED = "evicted"  # evicted by this put
REMOVED = "removed"  # a key a failed upstream put took back out

PAYLOAD_BYTES_SHOWN = 4
# A row shows at most this many keys at each end (the least and the most
# recent), and a list of keys at most LIST_SHOWN: the rest is counted, so a
# batch of 600,000 keys makes views and text of a few kilobytes, not gigabytes.
ROW_ENDS = 32
LIST_SHOWN = 64


@dataclass(frozen=True)
class Slot:
    """One stored key as drawn in a row."""

    key: str
    payload: bytes
    pins: int = 0  # its reference count (0: none)
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Row:
    """The store at one moment of a step, least recent key first."""

    label: str
    slots: tuple[Slot, ...]  # all of them, or the first and last ROW_ENDS
    unstored: tuple[tuple[str, int], ...] = ()  # pins on keys that are not stored (at most LIST_SHOWN)
    hidden: int = 0  # keys left out between the first and the last ROW_ENDS
    unstored_hidden: int = 0  # pins on unstored keys left out after the first LIST_SHOWN


@dataclass(frozen=True)
class Reason:
    """A key and why something happened to it."""

    key: str
    why: str


@dataclass(frozen=True)
class Field:
    """One compared field of a divergent step: expected and actual."""

    name: str
    expected: str
    actual: str

    @property
    def differs(self) -> bool:
        return self.expected != self.actual


@dataclass(frozen=True)
class Step:
    number: int  # 1-based
    op: Op
    call: str  # the call, payloads shown short
    outcome: Outcome | None  # None: the upstream profile leaves this input undefined
    rows: tuple[Row, ...]  # "before", the phases that changed something, "after"
    pins: tuple[tuple[str, int], ...]  # every reference count after the step, stored or not
    protected: tuple[str, ...] = ()
    terminal: tuple[str, ...] = ()
    evicted: tuple[Reason, ...] = ()
    spared: tuple[Reason, ...] = ()  # keys the eviction passed over, and why
    notes: tuple[str, ...] = ()
    closed: bool = False
    recorded: Outcome | None = None  # what the file expects, when it differs from the spec
    actual: tuple[Field, ...] = ()  # divergence only: expected vs actual
    state: State | None = None  # the model state after the step

    @property
    def outcome_text(self) -> str:
        return "undefined under upstream" if self.outcome is None else outcome_text(self.outcome)

    @property
    def first_difference(self) -> str | None:
        return next((f.name for f in self.actual if f.differs), None)

    @property
    def after(self) -> Row:
        return self.rows[-1]


@dataclass(frozen=True)
class Timeline:
    title: str
    description: str
    profile: str
    max_bytes: object
    object_nbytes: object
    capacity: int | None  # None: the store cannot be built
    built: Outcome
    steps: tuple[Step, ...] = ()
    target: str | None = None  # the target compared with, for a divergence
    diverges_at: int | None = None  # the 1-based step where it diverges; 0: the constructor
    constructor: tuple[Field, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def header(self) -> str:
        size = f"capacity {self.capacity}" if self.capacity is not None else f"not built: {outcome_text(self.built)}"
        return (
            f"store(max_bytes={self.max_bytes!r}, object_nbytes={self.object_nbytes!r}, "
            f"profile={self.profile!r}): {size}"
        )


# ------------------------------------------------------------------- text


def short_bytes(data: bytes) -> str:
    """A payload as its length and first few bytes, never a wall of hex."""
    if not data:
        return "0 B"
    if len(data) > PAYLOAD_BYTES_SHOWN and data == data[:1] * len(data):
        return f"{len(data)} B {data[:1].hex()}×{len(data)}"
    head = data[:PAYLOAD_BYTES_SHOWN].hex()
    return f"{len(data)} B {head}{'…' if len(data) > PAYLOAD_BYTES_SHOWN else ''}"


def outcome_text(outcome: Outcome) -> str:
    if isinstance(outcome, Err):
        return f"error: {outcome.kind.value}"
    value = outcome.value
    if value is None:
        return "ok"
    if isinstance(value, bytes):
        return f"ok, returns {short_bytes(value)}"
    if isinstance(value, model.Stats):
        shown = ", ".join(f"{name}={getattr(value, name)}" for name in value.__dataclass_fields__)
        return f"ok, returns stats({shown})"
    return f"ok, returns {value!r}"


def some(names: Sequence[str]) -> str:
    """``names`` joined by commas: at most LIST_SHOWN of them, then how many more."""
    shown = ", ".join(islice(names, LIST_SHOWN))
    return shown + (f", … {len(names) - LIST_SHOWN:,} more" if len(names) > LIST_SHOWN else "")


def _keys_text(keys: KeyList) -> str:
    if isinstance(keys, Bad):
        return {"str": "'k0' (a str, not a list)", "int": "7 (not iterable)"}.get(keys.what, keys.what)
    shown = repr(list(keys[:LIST_SHOWN]))
    return shown if len(keys) <= LIST_SHOWN else f"{shown[:-1]}, … {len(keys) - LIST_SHOWN:,} more]"


def call_text(op: Op) -> str:
    """``op`` as the call it stands for, its payloads shown short."""
    if kind_of(op).owner is not OwnerCall.PUT:
        return describe(op)
    op = cast(Put, op)
    if isinstance(op.objects, Bad):
        return describe(op)
    shown = []
    for obj in islice(op.objects, LIST_SHOWN):
        if isinstance(obj, Bad):
            shown.append("<object without key and payload>" if obj.what == BAD_OBJECT else obj.what)
        else:
            key, payload = obj
            shown.append(f"{key!r}={'None' if payload is None else short_bytes(payload)}")
    pins = "".join(
        f", {name}={_keys_text(keys)}" for name, keys in (("retain", op.retain), ("release", op.release)) if keys
    )
    if len(op.objects) > LIST_SHOWN:
        shown.append(f"… {len(op.objects) - LIST_SHOWN:,} more")
    form = f" as {op.form}" if op.form != "list" else ""
    return f"put([{', '.join(shown)}]{pins}){form}"


# --------------------------------------------------------------- timeline


def initial(trace: Trace) -> State | Err:
    """The state ``trace`` starts from, or why the store cannot be built."""
    return model.new(as_size(trace.max_bytes), as_size(trace.object_nbytes), trace.profile)


class TooLong(ValueError):
    """A timeline whose steps would hold more than the limit of keys."""


def timeline(
    trace: Trace,
    title: str = "",
    description: str = "",
    recorded: tuple[Outcome, ...] | None = None,
    most_held: int | None = None,
) -> Timeline:
    """Every op of ``trace`` as a ``Step``. ``recorded``: the outcomes a file
    expects, to flag any the spec disagrees with. ``most_held``: how many
    stored keys and pins the steps' states may hold in all (each step keeps
    the store after it: a long trace over a wide store is steps x keys).

    raises: TooLong"""
    built = initial(trace)
    sizes = (trace.profile, trace.max_bytes, trace.object_nbytes)
    if isinstance(built, Err):
        return Timeline(title, description, *sizes, capacity=None, built=built)
    state = built
    steps: list[Step] = []
    held = 0
    for index, op in enumerate(trace.ops):
        step = view(state, op, index + 1)
        if step.state is not None and most_held is not None:
            held += 1 + len(step.state.entries) + len(step.state.refs)
            if held > most_held:
                raise TooLong(f"step {index + 1}: the steps so far hold more than {most_held:,} keys and pins")
        if recorded is not None and index < len(recorded) and recorded[index] != step.outcome:
            step = replace(step, recorded=recorded[index])
        steps.append(step)
        if step.state is None:  # undefined: no later state to show
            break
        state = step.state
    return Timeline(title, description, *sizes, capacity=built.capacity, built=Ok(), steps=tuple(steps))


def _step(
    number: int,
    op: Op,
    outcome: Outcome,
    rows: list[Row],
    after: State,
    notes: list[str],
    protected: list[str] | None = None,
    terminal: list[str] | None = None,
    evicted: list[Reason] | None = None,
    spared: list[Reason] | None = None,
) -> Step:
    return Step(
        number,
        op,
        call_text(op),
        outcome,
        tuple(rows),
        after.refs,
        protected=tuple(protected or ()),
        terminal=tuple(terminal or ()),
        evicted=tuple(evicted or ()),
        spared=tuple(spared or ()),
        notes=tuple(notes),
        closed=after.closed,
        state=after,
    )


_INNER_CALLS = {"reenter-put": "put([])", "reenter-get": "get_concatenated([])", "reenter-close": "close()"}


def reentry_note(op: Op, closed: bool) -> str | None:
    """What the caller code of a reentrant form (``--from-inside``) meets, by
    semantics.md section 12; None for any other form. The model's outcome is
    the outer call's: the refused inner call changes nothing."""
    form = getattr(op, "form", "list")
    if form not in REENTRANT_FORMS:
        return None
    inner = _INNER_CALLS[form]
    outer = {"get": "get_concatenated"}.get(kind_of(op).name, kind_of(op).name)  # the method's name
    if closed:
        return f"the store is closed: {outer}() fails before its caller code runs, so {inner} is never made"
    return (
        f"caller code inside {outer}() (the generator it iterates) calls {inner} on the same store: "
        f"that inner call raises ReentrantCallError and changes nothing (section 12: calls from inside calls "
        f"are refused); the caller code swallows the error, so {outer}() goes on as if it had not been made"
    )


def view(state: State, op: Op, number: int = 1) -> Step:
    """What ``op`` does to ``state``: the ``Step`` a learner sees."""
    step = _view(state, op, number)
    note = reentry_note(op, state.closed)
    return step if note is None else replace(step, notes=(note, *step.notes))


def _view(state: State, op: Op, number: int) -> Step:
    before = _row("before", state)
    try:
        after, outcome = spec_step(state, op)
    except UndefinedInput as why:
        return Step(number, op, call_text(op), None, (before,), state.refs, notes=(str(why),), state=None)
    if state.closed and isinstance(outcome, Err) and outcome.kind == Kind.CLOSED:
        note = "the store is closed: every call but close fails and nothing changes"
        return _step(number, op, outcome, [before, _row("after", after)], after, [note])
    row = kind_of(op)
    if row.owner is OwnerCall.PUT:
        return _put_view(state, op, number, before, after, outcome)  # type: ignore[arg-type]
    if any(f.name == "keys" for f in row.fields):  # a read
        return _read_view(state, op, number, before, after, outcome)  # type: ignore[arg-type]
    if row.owner is OwnerCall.CLOSE:
        note = "already closed: closing again changes nothing" if state.closed else "close drops every key and pin"
    else:
        note = "an observation: nothing moves, nothing changes"
    return _step(number, op, outcome, [before, _row("after", after)], after, [note])


def _row(label: str, state: State, tags: dict[str, set[str]] | None = None) -> Row:
    return _row_of(label, dict(state.entries), dict(state.refs), tags or {})


def _row_of(label: str, order: dict[str, bytes], counts: dict[str, int], tags: dict[str, set[str]]) -> Row:
    hidden = max(len(order) - 2 * ROW_ENDS, 0)
    shown: Iterable[tuple[str, bytes]] = order.items()
    if hidden:
        last = list(islice(reversed(order.items()), ROW_ENDS))[::-1]
        shown = chain(islice(order.items(), ROW_ENDS), last)
    unstored = sorted((key, count) for key, count in counts.items() if key not in order)
    return Row(
        label,
        tuple(_slot(key, payload, counts.get(key, 0), frozenset(tags.get(key, ()))) for key, payload in shown),
        tuple(unstored[:LIST_SHOWN]),
        hidden,
        max(len(unstored) - LIST_SHOWN, 0),
    )


# One Slot for each (key, payload, pins, tags): a key that stays as it was
# is the same object in every row and every step, so a timeline of 50,000
# steps holds its distinct slots once, not 4 rows x 64 slots per step.
_slot = functools.lru_cache(maxsize=1 << 16)(Slot)


def _tag(tags: dict[str, set[str]], keys: Iterable[str], tag: str) -> None:
    for key in keys:
        tags.setdefault(key, set()).add(tag)


def _put_view(state: State, op: Put, number: int, before: Row, after_state: State, outcome: Outcome) -> Step:
    objects, retain, release = model_items(op.objects), model_keys(op.retain), model_keys(op.release)
    valid = model.validate_put(state.object_nbytes, objects, retain, release)
    if isinstance(valid, Kind):
        note = f"{valid.value} error: an invalid value is refused before anything changes"
        return _step(number, op, outcome, [before, _row("after", after_state)], after_state, [note])
    items, keys_retained, keys_released = valid
    rows = [before]
    notes: list[str] = []
    tags: dict[str, set[str]] = {}

    # 1. pins: retains, then releases, in order.
    counts, terminal, overreleased = model.apply_pins(dict(state.refs), list(keys_retained), list(keys_released))
    order = dict(state.entries)
    _tag(tags, terminal, TERMINAL)
    if keys_retained or keys_released:
        rows.append(_row_of("1. pins", order, counts, tags))
        unstored = sorted({k for k in keys_retained if k not in order})
        if unstored:
            notes.append(f"pins come before data: {some(unstored)} pinned without being stored")
    if overreleased:
        bad = _overreleased(dict(state.refs), keys_retained, keys_released)
        if state.profile == "strict":
            notes.append(f"release of {bad!r}, which holds no reference: the whole put is refused, nothing changes")
        else:
            notes.append(
                f"release of {bad!r}, which holds no reference: vLLM stops there, the pins before it stay applied"
            )
        rows.append(_row("after", after_state))
        return _step(number, op, outcome, rows, after_state, notes)

    # 2. the batch, de-duplicated as a dict would.
    batch = dict(items)
    inserted = model.place_batch(order, batch)
    # Sets beside the ordered lists: a batch of 600,000 keys is looked up in them once per key.
    is_terminal, is_inserted = set(terminal), set(inserted)
    protected = [k for k in batch if k not in is_terminal]
    is_protected = set(protected)
    _tag(tags, inserted, NEW)
    _tag(tags, (k for k in batch if k not in is_inserted), MOVED)
    _tag(tags, protected, PROTECTED)
    if len(items) > len(batch):
        notes.append("a key given twice in one batch keeps its first position and its last payload")
    kept = [k for k in batch if k not in is_inserted]
    if kept:
        notes.append(f"already stored, so it keeps its payload (first write wins) and moves: {some(kept)}")
    if batch:
        rows.append(_row_of("2. batch", order, counts, tags))
    # 3. stored terminal keys move to the most-recent end.
    stored_terminal = [k for k in terminal if k in order]
    model.move_terminal(order, terminal)
    if stored_terminal:
        rows.append(_row_of("3. terminal", order, counts, tags))
        notes.append(f"terminal keys move to the most-recent end: {some(stored_terminal)}")
    # 4. eviction.
    victims = model.choose_victims(order, state.capacity, counts, is_protected)
    spared: list[Reason] = []
    evicted: list[Reason] = []
    if len(order) > state.capacity:
        last = victims[-1] if victims else None
        for key in order:
            if key == last:
                break
            if key in counts:
                spared.append(Reason(key, f"{counts[key]} pin{'s' if counts[key] > 1 else ''}"))
            elif key in is_protected:
                spared.append(Reason(key, "protected: in the batch"))
        evict_tags = {k: set(v) for k, v in tags.items()}
        _tag(evict_tags, victims or (), EVICTED)
        rows.append(_row_of("4. evict", order, counts, evict_tags))
        if spared:
            notes.append("passed over: " + some([f"{r.key} ({r.why})" for r in spared]))
        if victims is None:
            must_stay = sum(1 for k in order if k in counts or k in is_protected)
            notes.append(
                f"{len(order)} keys for capacity {state.capacity}, {must_stay} of them pinned or protected:"
                " too few can be evicted, so the put fails"
            )
            if state.profile == "strict":
                notes.append("strict: nothing changes at all")
            else:
                gone = some(inserted) or "none"
                notes.append(f"upstream: pins and moves stay applied; only the new keys are taken out ({gone})")
        else:
            evicted = [Reason(k, "the least recent key with no pin, outside the batch") for k in victims]
    if isinstance(outcome, Err):  # strict: nothing changed; upstream: only the moves stayed
        keep = {TERMINAL, MOVED} if state.profile == "upstream" else set()
        tags = {key: found & keep for key, found in tags.items()}
    rows.append(_row("after", after_state, tags))
    return _step(number, op, outcome, rows, after_state, notes, protected, terminal, evicted, spared)


def _overreleased(counts: dict[str, int], retain: list[str], release: list[str]) -> str:
    """The release key that found no reference (as ``model.apply_pins`` stops at it)."""
    for key in retain:
        counts[key] = counts.get(key, 0) + 1
    for key in release:
        counts[key] = counts.get(key, 0) - 1
        if counts[key] < 0:
            return key
    raise ValueError("no release over-released")  # pragma: no cover - only called when one did


def _read_view(state: State, op: Get | ReadInto, number: int, before: Row, after: State, outcome: Outcome) -> Step:
    keys = model_keys(op.keys)
    wanted = [k for k in keys if isinstance(k, str)]
    stored = dict(state.entries)
    notes: list[str] = []
    tags: dict[str, set[str]] = {}
    if isinstance(outcome, Ok):
        _tag(tags, wanted, READ)
        if wanted:
            notes.append("each key read moves to the most-recent end, in the order read")
        else:
            notes.append("an empty read returns nothing and moves nothing")
    elif outcome.kind == Kind.MISSING:
        missing = next(k for k in wanted if k not in stored)
        notes.append(f"{missing!r} is not stored: the read fails and nothing moves")
    elif outcome.kind == Kind.BUFFER:
        notes.append("the buffer is too small for what would be read: nothing moves")
    else:
        notes.append(f"{outcome.kind.value} error: refused before anything moves")
    return _step(number, op, outcome, [before, _row("after", after, tags)], after, notes)
