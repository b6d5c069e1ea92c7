"""Every trace of a small scope, deduplicated by the spec's state.

The scope: stores of capacity 1 and 2 (objects of one byte), three keys, and a menu of ops over
them: puts of one key (two payloads, so first-write-wins shows), of two keys,
of one key twice, with a retain of itself or a release of another; retains
and releases alone, a release twice (pins 0 -> 1 -> 0, over-releases);
reads of one and two keys; close; and under ``strict`` a non-str key and a
payload of the wrong length. Breadth first from the empty store, each trace
is the path to a state plus one more op; a trace whose state was reached
before is not extended (from one spec state every continuation is the same
for the spec), so every state within ``depth`` ops is reached by some trace
and every op is tried from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import permutations

from auxspec.engine.expect import initial_state
from auxspec.engine.observable import observed
from auxspec.engine.ops import Close, Get, Op, Put, Trace
from auxspec.engine.table import step
from auxspec.models import sequential as model
from auxspec.reference.store import observe

KEYS = ("a", "b", "c")
CAPACITIES = (1, 2)
DEPTH = 4


def menu(profile: str) -> tuple[Op, ...]:
    """The ops of the scope."""
    first = {key: bytes([1 + i]) for i, key in enumerate(KEYS)}
    second = {key: bytes([0x81 + i]) for i, key in enumerate(KEYS)}
    ops: list[Op] = []
    for key in KEYS:
        ops += [
            Put(((key, first[key]),)),
            Put(((key, second[key]),)),
            Put(((key, first[key]), (key, second[key]))),
            Put(((key, first[key]),), (key,)),
            Put((), (key,)),
            Put((), (), (key,)),
            Put((), (), (key, key)),
            Get((key,)),
        ]
    for one, other in permutations(KEYS, 2):
        ops += [Put(((one, first[one]), (other, first[other]))), Put(((one, first[one]),), (), (other,))]
        ops.append(Get((one, other)))
    ops.append(Close())
    if profile == "strict":
        ops += [Put(((1, b"\x07"),)), Put((("a", b"\x07\x07"),))]
    return tuple(ops)


@dataclass
class Scope:
    """What a run covered: for the report."""

    traces: int = 0
    states: int = 0
    complete: bool = False  # every trace of the scope was produced


def traces(profile: str, depth: int = DEPTH, scope: Scope | None = None) -> Iterator[Trace]:
    """Every trace of the scope (see the module docstring), shortest first."""
    scope = scope if scope is not None else Scope()
    ops = menu(profile)
    for capacity in CAPACITIES:
        start = Trace(profile, capacity, 1)
        state = initial_state(start)
        assert isinstance(state, model.State)
        seen = {observed(observe(state), exact_order=True)}
        frontier: list[tuple[model.State, tuple[Op, ...]]] = [(state, ())]
        for level in range(depth):
            following: list[tuple[model.State, tuple[Op, ...]]] = []
            for before, path in frontier:
                for op in ops:
                    after = step(before, op)[0]
                    scope.traces += 1
                    yield Trace(profile, start.max_bytes, 1, (*path, op))
                    form = observed(observe(after), exact_order=True)
                    if form not in seen:
                        seen.add(form)
                        if level + 1 < depth:
                            following.append((after, (*path, op)))
            frontier = following
        scope.states += len(seen)
    scope.complete = True
