"""The input spaces CrossHair explores, and the creators that build them.

- ``bounded`` (``register_bounded``, ``BOUNDS``): every value comes from a
  small finite set by CrossHair forks, with no fallback to CrossHair's own
  values, so a condition can be exhausted. States are built whole
  (``make_bounded_state``: each profile and capacity, the first keys stored,
  each unpinned or referenced once or twice, references to keys that are not
  stored); all of them pass ``check(state)``.
- ``open`` (``register_factories``): the same kinds of small colliding values
  are favoured (``make_state``: capacity 1-4, often full, often every key
  pinned), but a small share of every choice is CrossHair's own, so no input
  is out of reach and nothing can be exhausted. It finds planted bugs sooner
  (the teeth test uses it).
- ``none``: CrossHair's own values, which almost never pass ``check(state)``.

``dict(...)`` inside the analysis is a real dict (``ordered_dict``):
CrossHair's stand-in does not keep insertion order, and the model's recency
order is dict order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from auxspec.models import sequential

MODES = ("bounded", "open", "none")


def _pick(space: Any, desc: str, low: int, high: int) -> int:
    """A value in [low, high], each equally likely, chosen by CrossHair forks."""
    for value in range(low, high):
        if space.smt_fork(desc=f"{desc}_{value}", probability_true=1.0 / (high - value + 1)):
            return value
    return high


# Most str and bytes values CrossHair makes come from these few: inputs drawn
# from the keys a state stores collide with them, which arbitrary symbolic
# strings do only by luck (a str used as a dict key is realized to a single
# solver value). Four keys a state may store, one it cannot be full of.
KEYS: tuple[str, ...] = ("a", "b", "c", "d", "e")
# Two payloads of the length a state mostly has (stored ones are b"a", b"b"...).
PAYLOADS: tuple[bytes, ...] = (b"p", b"q")
# How often a value comes from the small sets, or is valid where an Invalid
# marker may stand; the rest is CrossHair's own choice, so nothing is out of reach.
BIAS = 0.95
MAX_LENGTH = 3  # items in a batch or key list


@dataclass(frozen=True)
class Bounds:
    """A finite input space for ``--mode bounded``: every value CrossHair is
    given comes from these sets, by forks, with no fallback to CrossHair's
    own values. A condition CrossHair *confirms* under these bounds holds for
    every input in the space (CrossHair explored every path through it); one
    it reports *unknown* was explored for its time box without a
    counterexample, which says nothing about the paths it did not reach.

    States: each profile, each capacity, each payload length; closed; or
    open holding the first ``s`` of ``keys`` (``s`` up to the capacity, least
    recent first, payloads ``b"a"``, ``b"b"``... of that length), each stored
    key unpinned or referenced once or twice, and up to ``dangling`` further
    keys referenced (once or twice) without being stored. Every such state
    passes ``check``. Arguments: a key is one of ``keys`` or an ``Invalid``;
    a payload one of ``payloads`` or an ``Invalid``; a tuple of keys or items
    has 0 to ``max_length`` of them; an int is one of ``ints``; ``new``'s
    profile is one of ``PROFILES``.
    """

    capacities: tuple[int, ...] = (1, 2, 3)
    nbytes: tuple[int, ...] = (1,)
    keys: tuple[str, ...] = ("a", "b", "c")
    dangling: int = 1
    payloads: tuple[bytes, ...] = (b"p", b"q", b"pq")
    max_length: int = 2
    ints: tuple[int, ...] = (-1, 0, 1, 2, 3, 4, 5)
    counts: tuple[int, ...] = (0, 1, 2)  # a key's reference count in a dict[str, int] (0: absent)

    def describe(self, function: str = "") -> str:
        """The bounds that apply to ``function``'s parameters (all of them when unnamed)."""
        takes = ARGUMENTS.get(function, {"state", "keys", "payloads", "lists", "ints"}) if function else None
        parts = []
        if takes is None or "state" in takes:
            parts.append(
                f"states: capacity {'/'.join(map(str, self.capacities))}, payload length "
                f"{'/'.join(map(str, self.nbytes))}, keys {''.join(self.keys)}, "
                f"{self.dangling} dangling ref ({self.states()} states)"
            )
        if takes is None or "keys" in takes:
            parts.append(f"key arguments {''.join(self.keys)} or Invalid")
        if takes is None or "payloads" in takes:
            parts.append(f"payloads {'/'.join(p.decode() for p in self.payloads)} or Invalid")
        if takes is None or "lists" in takes:
            parts.append(f"lists of 0-{self.max_length}")
        if takes is None or "ints" in takes:
            parts.append(f"ints {self.ints[0]}..{self.ints[-1]} or Invalid")
        if takes is not None and "stored" in takes:
            parts.append(f"stored keys: the first 0-{len(self.keys)} of {''.join(self.keys)}, least recent first")
        if takes is not None and "counts" in takes:
            parts.append(f"reference counts: each of {''.join(self.keys)} {'/'.join(map(str, self.counts))}")
        if takes is not None and "sets" in takes:
            parts.append(f"key sets: each subset of {''.join(self.keys)}")
        if takes is not None and "profiles" in takes:
            parts.append("each profile")
        return "; ".join(parts)

    def states(self) -> int:
        """How many states ``make_bounded_state`` builds (the closed ones count once per profile)."""
        per_profile = 0
        for capacity in self.capacities:
            for stored in range(min(capacity, len(self.keys)) + 1):
                dangling = sum(2**d for d in range(min(self.dangling, len(self.keys) - stored) + 1))
                per_profile += 3**stored * dangling
        return len(PROFILES_) * (len(self.nbytes) * per_profile + 1)


PROFILES_ = sequential.PROFILES
# What each contracted function takes, for ``Bounds.describe``.
ARGUMENTS: dict[str, set[str]] = {
    "new": {"ints", "profiles"},
    "put": {"state", "keys", "payloads", "lists"},
    "get_concatenated": {"state", "keys", "lists"},
    "read_into": {"state", "keys", "lists", "ints"},
    "contains": {"state", "keys"},
    "close": {"state"},
    "flush": {"state"},
    "length": {"state"},
    "stats": {"state"},
    "apply_pins": {"counts", "lists"},
    "choose_victims": {"stored", "ints", "counts", "sets"},
}
# The bounds each contracted function is checked under in ``--mode bounded``
# (docs/proofs.md gives, per condition, the measured paths per second and why
# the bounds are what they are). Observers take only a state: the widest
# space. Reads add a key list; put adds a batch and two key lists, whose
# product with the states is too large to exhaust at 2 items each, so its
# lists hold at most one item (still eviction, pins and terminal moves).
BOUNDS: dict[str, Bounds] = {
    "new": Bounds(ints=tuple(range(-1, 9))),
    "close": Bounds(),
    "flush": Bounds(),
    "length": Bounds(),
    "stats": Bounds(),
    "contains": Bounds(capacities=(1, 2)),
    "get_concatenated": Bounds(capacities=(1, 2), keys=("a", "b")),
    "read_into": Bounds(capacities=(1, 2), keys=("a", "b"), dangling=0, ints=(0, 1, 2)),
    # put's arguments multiply: batches and pin lists of at most one item
    # keep its space exhaustible (docs/proofs.md says what that leaves out).
    "put": Bounds(capacities=(1, 2), keys=("a", "b"), payloads=(b"p", b"q", b"pq"), max_length=1),
    # put's steps, each on its own (docs/proofs.md): pins over two keys, eviction over three.
    "apply_pins": Bounds(keys=("a", "b")),
    "choose_victims": Bounds(keys=("a", "b", "c"), ints=(1, 2), counts=(0, 1)),
}
# CPU seconds per function in ``--mode bounded`` where the default 10 would cut
# its space short (measured: put's 14,144 paths take about 60 CPU s).
TIME_BOXES: dict[str, float] = {"get_concatenated": 20.0, "read_into": 40.0, "put": 90.0}
# Functions whose bounded space no time box here exhausts, searched only (none now).
UNBOUNDED_SEARCHES: frozenset[str] = frozenset()


def make_small(values: Sequence[Any], original: Callable[..., Any], factory: Any, *type_args: Any) -> Any:
    """One of ``values`` (chosen by CrossHair forks), else CrossHair's own value."""
    space = factory.space
    if space.smt_fork(desc=f"{factory.varname}_small", probability_true=BIAS):
        return values[_pick(space, f"{factory.varname}_value", 0, len(values) - 1)]
    return original(factory, *type_args)


def make_short_tuple(original: Callable[..., Any], factory: Any, *type_args: Any) -> Any:
    """``tuple[X, ...]``: usually 0 to ``MAX_LENGTH`` items of a length fixed
    by forks (a symbolic length costs a solver call at every step)."""
    if len(type_args) != 2 or type_args[1] is not Ellipsis:
        return original(factory, *type_args)
    space = factory.space
    if not space.smt_fork(desc=f"{factory.varname}_short", probability_true=BIAS):
        return original(factory, *type_args)
    length = _pick(space, f"{factory.varname}_len", 0, MAX_LENGTH)
    return tuple(factory(type_args[0], f"_{i}") for i in range(length))


def make_mostly_valid(invalid: type, original: Callable[..., Any], factory: Any, *members: Any) -> Any:
    """A union with the ``Invalid`` marker: usually one of the valid members."""
    if invalid not in members:
        return original(factory, *members)
    valid = [member for member in members if member is not invalid]
    if factory.space.smt_fork(desc=f"{factory.varname}_valid", probability_true=BIAS):
        return factory(valid[0]) if len(valid) == 1 else original(factory, *valid)
    return factory(invalid)


def make_state(state_type: type, factory: Any) -> Any:
    """A valid ``State`` for CrossHair: capacity 1-4, payloads of 1-2 bytes,
    often full, often every stored key pinned, sometimes references to keys
    that are not stored. Now and then it falls back to arbitrary field values,
    so no state is out of reach (``check(state)`` filters those)."""
    space = factory.space
    name = factory.varname
    if space.smt_fork(desc=f"{name}_arbitrary", probability_true=0.05):
        return state_type(
            factory(str, "_profile"),
            factory(int, "_capacity"),
            factory(int, "_object_nbytes"),
            factory(tuple[tuple[str, bytes], ...], "_entries"),
            factory(tuple[tuple[str, int], ...], "_refs"),
            factory(bool, "_closed"),
        )
    profile = "strict" if space.smt_fork(desc=f"{name}_strict") else "upstream"
    capacity = _pick(space, f"{name}_capacity", 1, 4)
    object_nbytes = 1 if space.smt_fork(desc=f"{name}_nbytes", probability_true=0.9) else 2
    if space.smt_fork(desc=f"{name}_closed", probability_true=0.05):
        return state_type(profile, capacity, object_nbytes, closed=True)
    if space.smt_fork(desc=f"{name}_full", probability_true=0.5):
        stored = capacity
    else:
        stored = _pick(space, f"{name}_stored", 0, capacity - 1)
    dangling = 0
    while stored + dangling < len(KEYS) and dangling < 2:
        if not space.smt_fork(desc=f"{name}_dangling{dangling}", probability_true=0.3):
            break
        dangling += 1
    all_pinned = space.smt_fork(desc=f"{name}_all_pinned", probability_true=0.3)
    counts: list[tuple[str, int]] = []
    for i, key in enumerate(KEYS[: stored + dangling]):
        if i < stored and not all_pinned and not space.smt_fork(desc=f"{name}_pin{i}"):
            continue
        twice = space.smt_fork(desc=f"{name}_count{i}", probability_true=0.25)
        counts.append((key, 2 if twice else 1))
    entries = tuple((key, bytes([0x61 + i]) * object_nbytes) for i, key in enumerate(KEYS[:stored]))
    return state_type(profile, capacity, object_nbytes, entries, tuple(sorted(counts)))


def make_bounded_state(state_type: type, factory: Any, bounds: Bounds) -> Any:
    """One of the finitely many states of ``bounds`` (see ``Bounds``), chosen by forks."""
    space = factory.space
    name = factory.varname

    def pick(what: str, values: Sequence[Any]) -> Any:
        return values[_pick(space, f"{name}_{what}", 0, len(values) - 1)]

    profile = pick("profile", PROFILES_)
    if space.smt_fork(desc=f"{name}_closed", probability_true=0.1):
        return state_type(profile, bounds.capacities[0], bounds.nbytes[0], closed=True)
    object_nbytes = pick("nbytes", bounds.nbytes)
    capacity = pick("capacity", bounds.capacities)
    stored = pick("stored", range(min(capacity, len(bounds.keys)) + 1))
    dangling = pick("dangling", range(min(bounds.dangling, len(bounds.keys) - stored) + 1))
    counts: list[tuple[str, int]] = []
    for i, key in enumerate(bounds.keys[: stored + dangling]):
        count = pick(f"count{i}", (0, 1, 2) if i < stored else (1, 2))
        if count:
            counts.append((key, count))
    entries = tuple((key, bytes([0x61 + i]) * object_nbytes) for i, key in enumerate(bounds.keys[:stored]))
    return state_type(profile, capacity, object_nbytes, entries, tuple(sorted(counts)))


def make_remote_state(state_type: type, factory: Any, keys: Sequence[str]) -> Any:
    """A remote-profile ``State`` (``auxspec.models.remote``), chosen by forks:
    closed, or each of ``keys`` absent or stored with payload ``b"a"`` or
    ``b"b"``, and at most one gone set (the first two stored keys, or all of
    them when more are stored). Every such state passes the model's ``check``."""
    space = factory.space
    name = factory.varname
    if space.smt_fork(desc=f"{name}_closed", probability_true=0.1):
        return state_type(1, closed=True)
    objects = []
    for i, key in enumerate(keys):
        choice = _pick(space, f"{name}_object{i}", 0, 2)
        if choice:
            objects.append((key, b"ab"[choice - 1 : choice]))
    stored = tuple(key for key, _ in objects)
    # None, or a pair, or (when more are stored) all of them: each a different state.
    choices: list[tuple[tuple[str, ...], ...]] = [()]
    choices += [(stored[:2],)] if len(stored) >= 2 else []
    choices += [(stored,)] if len(stored) > 2 else []
    gone = choices[_pick(space, f"{name}_gone", 0, len(choices) - 1)]
    return state_type(1, tuple(objects), gone)


def register_bounded(model: ModuleType, bounds: Bounds) -> None:
    """Make every value CrossHair builds come from ``bounds`` (``--mode bounded``):
    states from ``make_bounded_state``, str, bytes and int from the bounds'
    sets, tuples of 0 to ``max_length`` items, unions with ``model.Invalid``
    either ``Invalid()`` or a valid member. Nothing is CrossHair's own value,
    so the space is finite and a condition can be exhausted.

    raises: RuntimeError (this CrossHair has no registry of creators to replace)
    """
    from typing import Union

    from crosshair import core

    state_type = model.State
    invalid = model.Invalid
    if is_remote(model):
        core.register_type(state_type, lambda factory: make_remote_state(state_type, factory, bounds.keys))
    else:
        core.register_type(state_type, lambda factory: make_bounded_state(state_type, factory, bounds))
    proxies = getattr(core, "_SIMPLE_PROXIES", None)
    if not isinstance(proxies, dict) or not all(
        typ in proxies for typ in (str, bytes, int, tuple, list, set, dict, Union)
    ):
        raise RuntimeError("this CrossHair has no creators to replace; bounded mode cannot bound the inputs")

    def choose(factory: Any, values: Sequence[Any]) -> Any:
        return values[_pick(factory.space, f"{factory.varname}_value", 0, len(values) - 1)]

    def make_str(factory: Any, *args: Any) -> Any:
        # CrossHair names a value after its parameter, with a serial suffix.
        is_profile = re.fullmatch(r"profile(_\d+)?", str(factory.varname)) is not None
        return choose(factory, PROFILES_ if is_profile else bounds.keys)

    union, tuples = proxies[Union], proxies[tuple]

    def make_tuple(factory: Any, *args: Any) -> Any:
        if len(args) != 2 or args[1] is not Ellipsis:
            return tuples(factory, *args)
        length = _pick(factory.space, f"{factory.varname}_len", 0, bounds.max_length)
        return tuple(factory(args[0], f"_{i}") for i in range(length))

    def make_union(factory: Any, *members: Any) -> Any:
        if invalid not in members:
            return union(factory, *members)
        valid = [member for member in members if member is not invalid]
        if factory.space.smt_fork(desc=f"{factory.varname}_valid", probability_true=0.9):
            return factory(valid[0]) if len(valid) == 1 else union(factory, *valid)
        return invalid()

    lists, sets, dicts = proxies[list], proxies[set], proxies[dict]

    def make_list(factory: Any, *args: Any) -> Any:
        if len(args) != 1:
            return lists(factory, *args)
        length = _pick(factory.space, f"{factory.varname}_len", 0, bounds.max_length)
        return [factory(args[0], f"_{i}") for i in range(length)]

    def make_set(factory: Any, *args: Any) -> Any:
        if args != (str,):
            return sets(factory, *args)
        space = factory.space
        return {key for i, key in enumerate(bounds.keys) if space.smt_fork(desc=f"{factory.varname}_has{i}")}

    def make_dict(factory: Any, *args: Any) -> Any:
        space, name = factory.space, factory.varname
        if args == (str, int):  # reference counts: each key absent or one of the bounds' counts
            counts = {key: choose_count(space, f"{name}_count{i}") for i, key in enumerate(bounds.keys)}
            return {key: count for key, count in counts.items() if count}
        if args == (str, bytes):  # a store's keys and payloads, least recent first, as states hold them
            stored = _pick(space, f"{name}_stored", 0, len(bounds.keys))
            return {key: bytes([0x61 + i]) * bounds.nbytes[0] for i, key in enumerate(bounds.keys[:stored])}
        return dicts(factory, *args)

    def choose_count(space: Any, desc: str) -> int:
        return bounds.counts[_pick(space, desc, 0, len(bounds.counts) - 1)]

    proxies[list] = make_list
    proxies[set] = make_set
    proxies[dict] = make_dict
    proxies[str] = make_str
    proxies[bytes] = lambda factory, *args: choose(factory, bounds.payloads)
    proxies[int] = lambda factory, *args: choose(factory, bounds.ints)
    proxies[tuple] = make_tuple
    proxies[Union] = make_union


def ordered_dict(*args: Any, **kwargs: Any) -> dict[Any, Any]:
    """``dict(...)`` as CPython builds it: a real dict, first position and last
    value per key. CrossHair's own stand-in (0.0.113) orders a pair list with
    a repeated key by last occurrence, and a key popped and set again keeps
    its old place; the model's recency order is dict order, so that stand-in
    yields false counterexamples."""
    if len(args) > 1:
        raise TypeError(f"dict expected at most 1 argument, got {len(args)}")
    result: dict[Any, Any] = {}
    if args:
        source = args[0]
        if hasattr(source, "keys"):
            for key in source:
                result[key] = source[key]
        else:
            for pair in source:
                key, value = pair
                result[key] = value
    for key, value in kwargs.items():
        result[key] = value
    return result


def install_ordered_dict() -> None:
    """Make ``dict(...)`` inside CrossHair's analysis ``ordered_dict``."""
    from crosshair import core

    patches = getattr(core, "_PATCH_REGISTRATIONS", None)
    if not isinstance(patches, dict) or dict not in patches:
        raise RuntimeError("this CrossHair has no dict patch to replace; check ordered_dict is still needed")
    patches[dict] = ordered_dict


def register_factories(model: ModuleType) -> None:
    """Make CrossHair build ``model.State`` with ``make_state``, most str and
    bytes values with ``make_small``, and unions with ``model.Invalid`` with
    ``make_mostly_valid``.

    CrossHair has no public way to replace the creator of a built-in type, so
    those are swapped in its registry; if the registry is not there (another
    CrossHair version), they stay CrossHair's own.
    """
    from typing import Union

    from crosshair import core

    state_type = model.State
    if is_remote(model):
        core.register_type(state_type, lambda factory: make_remote_state(state_type, factory, KEYS[:4]))
    else:
        core.register_type(state_type, lambda factory: make_state(state_type, factory))
    proxies = getattr(core, "_SIMPLE_PROXIES", None)
    if not isinstance(proxies, dict) or not all(typ in proxies for typ in (str, bytes, tuple, Union)):
        return
    invalid = model.Invalid

    def small(values: Sequence[Any], original: Callable[..., Any]) -> Callable[..., Any]:
        return lambda factory, *args: make_small(values, original, factory, *args)

    union = proxies[Union]
    proxies[str] = small(KEYS, proxies[str])
    proxies[bytes] = small(PAYLOADS, proxies[bytes])
    tuples = proxies[tuple]
    proxies[tuple] = lambda factory, *args: make_short_tuple(tuples, factory, *args)
    proxies[Union] = lambda factory, *members: make_mostly_valid(invalid, union, factory, *members)


def is_remote(model: ModuleType) -> bool:
    """Whether ``model`` is the remote profile's model (its own states)."""
    return getattr(model, "PROFILE", None) == "remote"


def described(model: ModuleType, bounds: Bounds, function: str) -> str:
    """``bounds.describe``, with the states ``make_remote_state`` builds for the remote model."""
    text = bounds.describe(function)
    if not is_remote(model):
        return text
    stored = [math.comb(len(bounds.keys), n) * 2**n for n in range(len(bounds.keys) + 1)]  # by how many are stored
    count = 1 + sum(ways * (1 + (n >= 2) + (n > 2)) for n, ways in enumerate(stored))  # closed, then gone sets
    states = (
        f"remote states: closed, or keys {''.join(bounds.keys)} each absent or stored (2 payloads), "
        f"at most one gone set ({count} states)"
    )
    return re.sub(r"^states: [^;]*", states, text).replace("; each profile", "")  # the remote model has one
