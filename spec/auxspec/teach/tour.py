"""The guided tour's teaching traces and the pictures drawn from them.

Each lesson is a short trace; ``write(folder)`` saves it as a trace file
(for ``auxspec explain``) and its timeline as an SVG (for the docs). The
background writer's lesson is a scenario of the background model
(``auxspec.models.background``): owner calls and writer steps, drawn as the queue
above the store. ``python -m auxspec.teach.tour docs/tour`` rewrites them;
tests/test_site.py checks the committed files are what this writes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from auxspec.engine import traces
from auxspec.engine.ops import Get, Put, Trace
from auxspec.models import background as bg
from auxspec.models import sequential as model
from auxspec.teach.svg import moments_svg, timeline_svg
from auxspec.teach.timeline import Row, Slot, Timeline, call_text, outcome_text, timeline


@dataclass(frozen=True)
class Lesson:
    name: str
    title: str
    trace: Trace

    def timeline(self) -> Timeline:
        return timeline(self.trace, self.title)


def _objs(*keys: str) -> tuple[tuple[str, bytes], ...]:
    return tuple((key, (key * 2).encode()[:2]) for key in keys)


_CAPACITY_FAILURE = (
    Put(_objs("a", "b"), ("a",)),
    # b re-put, c and d new (c pinned), a released to zero: 4 keys, 3 of them pinned or protected
    Put(_objs("b", "c", "d"), ("c",), ("a",)),
)

LESSONS: tuple[Lesson, ...] = (
    Lesson(
        "recency",
        "Recency: puts append, reads move, the least recent key goes",
        Trace("strict", 6, 2, (Put(_objs("a", "b", "c")), Get(("a",)), Put(_objs("d")))),
    ),
    Lesson(
        "pins-before-data",
        "Pins before data: a key pinned before it is stored is never evicted",
        Trace("strict", 4, 2, (Put((), ("x",)), Put(_objs("x")), Put(_objs("a")), Put(_objs("b")))),
    ),
    Lesson(
        "terminal-moves",
        "Terminal moves: released to zero, a key becomes most recent, in the order of its release",
        Trace(
            "strict",
            6,
            2,
            (Put(_objs("a", "b", "c"), ("a", "b")), Put((), (), ("b", "a")), Put(_objs("d"))),
        ),
    ),
    Lesson(
        "batch-protection",
        "The batch protects itself, except a key that became terminal in the same put",
        Trace(
            "strict",
            4,
            2,
            (Put(_objs("a", "b")), Put(_objs("a", "c")), Put(_objs("e"), ("e",), ("e",))),
        ),
    ),
    Lesson(
        "capacity-strict",
        "Capacity failure under strict: nothing changes at all",
        Trace("strict", 4, 2, _CAPACITY_FAILURE),
    ),
    Lesson(
        "capacity-upstream",
        "Capacity failure under upstream (vLLM): pins and moves stay, new keys are taken out",
        Trace("upstream", 4, 2, _CAPACITY_FAILURE),
    ),
)


# ------------------------------------------------------------------ background


@dataclass(frozen=True)
class Moment:
    """One owner call or writer step of a background scenario, and after it."""

    caption: str
    rows: tuple[Row, ...]


def _queue_row(state: bg.BgState) -> Row:
    slots = []
    for index, batch in enumerate(state.queue):
        keys = " ".join(k for k, _ in batch.objects if isinstance(k, str))
        tags = {"queued", "taken"} if index == 0 and state.started else {"queued"}
        slots.append(Slot(keys or "pins", b"", 0, frozenset(tags)))
    return Row("queue", tuple(slots))


def _store_row(state: bg.BgState) -> Row:
    refs = dict(state.inner.refs)
    return Row("store", tuple(Slot(k, p, refs.get(k, 0)) for k, p in state.inner.entries))


def _moment(caption: str, state: bg.BgState) -> Moment:
    latched = f"   [latched: {state.error}]" if state.error else ""
    return Moment(caption + latched, (_queue_row(state), _store_row(state)))


def _shown(outcome: bg.BgOutcome) -> str:
    if isinstance(outcome, bg.Latched):
        return f"raises BlockObjectStoreError (the writer's {outcome.cause} failure)"
    return outcome_text(outcome)


def background_lesson() -> tuple[str, tuple[Moment, ...]]:
    """Owner puts return once queued; the writer applies them in order; a read
    waits for the queue (read-your-writes); a failure is latched."""
    inner = model.new(6, 2, "strict")
    assert isinstance(inner, model.State)
    built = bg.new_background(inner, 2)
    assert isinstance(built, bg.BgState)
    state = built
    moments = [_moment("new background store: max_pending_batches=2, capacity 3", built)]

    def owner_put(objects: tuple[tuple[str, bytes], ...], retain: tuple[str, ...] = ()) -> None:
        nonlocal state
        op = Put(objects, retain)
        state, outcome = bg.put(state, bg.Batch(objects, retain))[0]  # the writer makes no progress meanwhile
        moments.append(_moment(f"owner: {call_text(op)} → {_shown(outcome)} (queued)", state))

    def writer(what: str, step: Callable[[bg.BgState], bg.BgState]) -> None:
        nonlocal state
        state = step(state)
        moments.append(_moment(f"writer: {what}", state))

    def owner_get(keys: tuple[str, ...]) -> None:
        nonlocal state
        state, outcome = bg.get_concatenated(state, keys)
        moments.append(_moment(f"owner: {call_text(Get(keys))} waits for the queue → {_shown(outcome)}", state))

    owner_put(_objs("a", "b"), ("a",))
    owner_put(_objs("c"))
    writer("takes the first batch (it no longer counts against the bound)", bg.writer_take)
    writer("applies it", bg.writer_step)
    owner_get(("c",))
    owner_put(_objs("d", "e", "f"))  # three protected keys and the pinned a: cannot fit
    writer("applies it: the put fails for capacity", bg.writer_step)
    owner_get(("a",))
    title = "The background writer: queued puts, read-your-writes, a latched failure"
    return title, tuple(moments)


# ----------------------------------------------------------------------- files


def files() -> dict[str, str]:
    """Every file of the tour folder, by name, as ``write`` writes it."""
    written: dict[str, str] = {}
    for lesson in LESSONS:
        vector = traces.vector_from_trace(lesson.trace, f"tour/{lesson.name}", lesson.title)
        written[f"{lesson.name}.jsonl"] = traces.dumps(vector)
        written[f"{lesson.name}.svg"] = timeline_svg(lesson.timeline())
    title, moments = background_lesson()
    written["background.svg"] = moments_svg(title, tuple((m.caption, m.rows) for m in moments))
    return written


def write(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files().items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else Path("docs/tour")
    print(f"wrote {len(write(folder))} files to {folder}")
    return 0


__all__ = ["LESSONS", "Lesson", "background_lesson", "files", "write"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
