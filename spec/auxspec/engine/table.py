"""The op table: one row per op kind, saying everything that kind does.

A row gives the op's fields (and their kinds, which the codec, the trace
format and the call arguments read generically), its step on the model, its
call on a Python target, how it reads to a person, which feature a target
needs for it, which background owner call it is, and how often the byte
decoder picks it. Nothing outside this module dispatches on op types: the
engine, the drivers and the tools ask ``kind_of(op)``.

Adding an op kind: add its dataclass to ``ops``, its model step to the
model, and its row here (see docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from auxspec.engine import calls
from auxspec.engine.fields import (
    Batch,
    Buffer,
    Field,
    Flag,
    Form,
    Key,
    Keys,
    Payloads,
    Shape,
    model_buffer,
    model_items,
    python_only,
    show_buffer,
)
from auxspec.engine.fields import model_key as _key
from auxspec.engine.fields import model_keys as _keys
from auxspec.engine.fields import show as _show
from auxspec.engine.ops import (
    OBSERVE,
    PYTHON,
    READ_INTO,
    STATS,
    Bad,
    Close,
    Contains,
    Enter,
    Exit,
    Features,
    Flush,
    Get,
    Len,
    Op,
    Put,
    ReadInto,
    Stats,
    Trace,
)
from auxspec.models import sequential as model
from auxspec.models.background import OwnerCall
from auxspec.models.sequential import Outcome, State

STATS_FIELDS = tuple(f.name for f in fields(model.Stats))

Step = Callable[[Any, State, Any], tuple[State, Outcome]]  # (semantics, state, op)


@dataclass(frozen=True)
class OpKind:
    """One op kind. ``step`` takes the semantics module (the model, or a
    stand-in with the same functions, such as the contract-checked one),
    the state and the op. ``call`` makes the call on a store and returns
    what the model calls the value; exceptions propagate."""

    cls: type
    fields: tuple[Field, ...]
    step: Step
    call: Callable[[Any, Any], model.Value]
    show: Callable[[Any], str]
    owner: OwnerCall  # what it is to a background store (models.background)
    feature: str | None = None  # what a target needs beyond put, get and close
    slots: int = 0  # of the 32 values of an op byte's low five bits, how many pick it
    group: str = ""  # rows sharing their slots; one more byte picks among them
    one_pass_upstream: bool = False  # vLLM reads this op's lists once, so a one-pass iterator is defined

    @property
    def name(self) -> str:
        return str(self.cls.name)  # type: ignore[attr-defined]


# ------------------------------------------------------------------ calls


def _put(store: Any, op: Put) -> None:
    reentry = calls.Reentry.of(op, store, "put")
    call = calls.batch(op.objects, op.form, reentry, op.payloads)
    try:
        store.put(
            call.objects,
            retain_keys=calls.passed(op.retain, op.form, reentry),
            release_keys=calls.passed(op.release, op.form, reentry),
        )
    finally:
        if reentry is not None:  # an inner call let through is the divergence, whatever the outer call did
            reentry.check()
    if call.after is not None:
        call.after()


def _get(store: Any, op: Get) -> bytes:
    reentry = calls.Reentry.of(op, store, "get_concatenated")
    try:
        got = store.get_concatenated(calls.passed(op.keys, op.form, reentry))
    finally:
        if reentry is not None:
            reentry.check()
    return calls.as_bytes("get_concatenated()", got)


def _read_into(store: Any, op: ReadInto) -> bytes | None:
    made = calls.buffer(op.buffer, op.readonly, op.form, op.shape)
    reentry = calls.Reentry.of(op, store, "read_into")
    try:
        written = store.read_into(calls.passed(op.keys, op.form, reentry), made.passed)
    except Exception as error:
        if reentry is not None:
            reentry.check()
        if made.memory is not None and made.changed():  # a failed call writes nothing (semantics.md, section 2)
            raise AssertionError(f"read_into raised {type(error).__name__} and wrote into the buffer") from error
        raise
    if reentry is not None:
        reentry.check()
    if made.memory is None or isinstance(op.buffer, Bad):
        return None  # a bad buffer must have been refused: any return is a divergence
    count = calls.as_count("read_into()", written)
    room = made.room()
    if not 0 <= count <= room:
        raise calls.OddReturn(f"read_into() returned {count}, outside the buffer's {room} bytes")
    return made.written(count)


def _stats(store: Any) -> model.Stats:
    """``stats()``'s fields, read as attributes or, from a mapping, by key; each an int."""
    got = store.stats()
    values = []
    for name in STATS_FIELDS:
        try:
            value = got[name] if isinstance(got, Mapping) else getattr(got, name)
        except (KeyError, AttributeError):
            raise calls.OddReturn(f"stats() returned {type(got).__name__} without the field {name!r}") from None
        values.append(calls.as_count(f"stats().{name}", value))
    return model.Stats(*values)


def _len(store: Any) -> int:
    # As len() looks it up (on the type), without len()'s own TypeError for a non-int.
    return calls.as_count("__len__()", type(store).__len__(store))


def _enter(store: Any) -> None:
    entered = store.__enter__()
    if entered is not store:
        raise AssertionError(f"__enter__ returned {entered!r}, not the store itself")


def _none(call: Callable[[], object]) -> None:
    call()


def _show_put(op: Put) -> str:
    pins = "".join(
        f", {name}={_show(Keys(2), keys)}" for name, keys in (("retain", op.retain), ("release", op.release)) if keys
    )
    kind = f" with payloads as {op.payloads}" if op.payloads != "bytes" else ""
    return f"put({_show(Batch(3), op.objects)}{pins}){_form(op)}{kind}"


def _form(op: Any) -> str:
    return f" as {op.form}" if op.form != "list" else ""


# -------------------------------------------------------------------- rows

TABLE: tuple[OpKind, ...] = (
    OpKind(
        Put,
        (
            Field("objects", Batch(3)),
            Field("retain", Keys(2, "retain")),
            Field("release", Keys(2, "release")),
            Field("form", Form()),
            Field("payloads", Payloads()),
        ),
        lambda m, s, op: m.put(s, model_items(op.objects, op.payloads), _keys(op.retain), _keys(op.release)),
        _put,
        _show_put,
        OwnerCall.PUT,
        slots=17,
        one_pass_upstream=True,
    ),
    OpKind(
        Get,
        (Field("keys", Keys(4), required=True), Field("form", Form())),
        lambda m, s, op: m.get_concatenated(s, _keys(op.keys)),
        _get,
        lambda op: f"get_concatenated({_show(Keys(4), op.keys)}){_form(op)}",
        OwnerCall.WAIT,
        slots=7,
    ),
    OpKind(
        ReadInto,
        (
            Field("keys", Keys(3), required=True),
            Field("buffer", Buffer(), required=True),
            Field("readonly", Flag()),
            Field("form", Form()),
            Field("shape", Shape()),
        ),
        lambda m, s, op: m.read_into(s, _keys(op.keys), model_buffer(op.buffer, op.readonly)),
        _read_into,
        lambda op: f"read_into({_show(Keys(3), op.keys)}, {show_buffer(op.buffer, op.readonly, op.shape)}){_form(op)}",
        OwnerCall.WAIT,
        feature=READ_INTO,
        slots=5,
    ),
    OpKind(
        Flush,
        (),
        lambda m, s, op: m.flush(s),
        lambda store, op: _none(store.flush),
        lambda op: "flush()",
        OwnerCall.WAIT,
        feature=OBSERVE,
        slots=2,
        group="observe",
    ),
    OpKind(
        Len,
        (),
        lambda m, s, op: m.length(s),
        lambda store, op: _len(store),
        lambda op: "len(store)",
        OwnerCall.WAIT,
        feature=OBSERVE,
        group="observe",
    ),
    OpKind(
        Contains,
        (Field("key", Key(), required=True),),
        lambda m, s, op: m.contains(s, _key(op.key)),
        lambda store, op: op.key in store,
        lambda op: f"{op.key!r} in store",
        OwnerCall.WAIT,
        feature=OBSERVE,
        group="observe",
    ),
    OpKind(
        Stats,
        (),
        lambda m, s, op: m.stats(s),
        lambda store, op: _stats(store),
        lambda op: "stats()",
        OwnerCall.WAIT,
        feature=STATS,
        group="observe",
    ),
    OpKind(
        Enter,
        (),
        lambda m, s, op: m.flush(s),
        lambda store, op: _enter(store),
        lambda op: "store.__enter__()",
        OwnerCall.ENTER,
        feature=OBSERVE,
        group="observe",
    ),
    OpKind(
        Exit,
        (),
        lambda m, s, op: m.close(s),
        lambda store, op: _none(lambda: store.__exit__(None, None, None)),
        lambda op: "store.__exit__(None, None, None)",
        OwnerCall.CLOSE,
        feature=OBSERVE,
        group="observe",
    ),
    OpKind(
        Close,
        (),
        lambda m, s, op: m.close(s),
        lambda store, op: _none(store.close),
        lambda op: "close()",
        OwnerCall.CLOSE,
        slots=1,
    ),
)

_BY_TYPE: dict[type, OpKind] = {row.cls: row for row in TABLE}
BY_NAME: dict[str, OpKind] = {row.name: row for row in TABLE}


def kind_of(op: Op) -> OpKind:
    """The row of ``op``'s kind."""
    return _BY_TYPE[type(op)]


# ------------------------------------------------------------ what rows say


def step(state: State, op: Op, semantics: Any = model) -> tuple[State, Outcome]:
    """``op`` on a model state: the step of its row, on ``semantics`` (the
    sequential model unless a checked stand-in is given)."""
    return kind_of(op).step(semantics, state, op)


def invoke(store: Any, op: Op) -> model.Value:
    """Make the call ``op`` stands for on ``store`` and return what the model
    calls its value (``read_into``: the bytes written); exceptions propagate."""
    return kind_of(op).call(store, op)


def describe(op: Op) -> str:
    """``op`` as the call it stands for, for people."""
    return kind_of(op).show(op)


def needs(op: Op) -> Features:
    """The features a target must have to run ``op``."""
    row = kind_of(op)
    wanted = {row.feature} if row.feature else set()
    for field in row.fields:
        value = getattr(op, field.name)
        if python_only(field.kind, value):
            wanted.add(PYTHON)
    return frozenset(wanted)


def trace_needs(trace: Trace) -> Features:
    """The features a target must have to run every op of ``trace``."""
    found: set[str] = set()
    for op in trace.ops:  # one op at a time: a million-op trace makes no million sets at once
        found |= needs(op)
    return frozenset(found)
