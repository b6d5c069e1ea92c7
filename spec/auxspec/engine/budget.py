"""A deadline that a replay keeps inside itself, not only between replays.

The shrinker judges candidates one after another and checks its clock
between them; one candidate of a deep trace (tens of thousands of calls,
lists of thousands of keys) can take longer than the whole budget. Under
``until(deadline)``, the compare loop and the spec's own passes over a
trace call ``check()`` every ``EVERY`` ops, which raises ``OutOfTime`` once
the deadline has passed; the search catches it and ends "by time". Outside
``until`` there is no deadline and ``check()`` costs a context lookup.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar

EVERY = 64  # ops between clock reads: one read costs about as much as a cheap op

_deadline: ContextVar[float] = ContextVar("auxspec_deadline", default=math.inf)


class OutOfTime(Exception):
    """The deadline of the innermost ``until`` passed in mid-replay."""


@contextlib.contextmanager
def until(deadline: float) -> Iterator[None]:
    """Replays inside stop at ``deadline`` (``time.monotonic()``), or at an outer one if sooner."""
    token = _deadline.set(min(deadline, _deadline.get()))
    try:
        yield
    finally:
        _deadline.reset(token)


def check() -> None:
    """Raise ``OutOfTime`` when the innermost deadline has passed."""
    deadline = _deadline.get()
    if deadline != math.inf and time.monotonic() > deadline:
        raise OutOfTime


def check_every(index: int) -> None:
    """``check()`` on every ``EVERY``-th op of a loop counting ``index``."""
    if index % EVERY == 0:
        check()
