"""Check every PEP 316 contract of the model with CrossHair, and say what was proved.

``python -m auxspec.checks.crosshair`` is ``crosshair check
--analysis_kind=PEP316`` over ``spec/auxspec/models/sequential.py``, run one
postcondition per worker process so two cores share the work, with a CPU
time box per postcondition and a hard wall-clock limit on the whole run. It
reports each condition as

- *confirmed*: CrossHair explored every path through the input space, so the
  condition holds for every input in it (with ``--mode bounded``, the
  default, that space is the finite one printed with the condition);
- *unknown*: the time box ran out after the paths it prints, none of which
  broke the condition; that is a search without a counterexample, not a proof;
- *refuted*: a counterexample (printed);

and exits 0 only if no postcondition was refuted, raised, or could not meet
its precondition. docs/proofs.md lists the bounds and what was measured.

The input spaces (``--mode``):

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
  (the teeth test, ``check_models``, uses it).
- ``none``: CrossHair's own values, which almost never pass ``check(state)``.

``dict(...)`` inside the analysis is a real dict (``ordered_dict``):
CrossHair's stand-in does not keep insertion order, and the model's recency
order is dict order.

``check_models`` is the same machinery for other copies of the model (the
teeth test plants bugs in copies and expects counterexamples).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from auxspec.models import sequential

MODEL_PATH = Path(__file__).resolve().parents[1] / "models" / "sequential.py"
# The remote profile's model (docs/remote.md): its own states, built by make_remote_state.
REMOTE_MODEL_PATH = MODEL_PATH.with_name("remote.py")
DEFAULT_CONDITION_TIMEOUT = 10.0  # CPU seconds per postcondition
# Wall clock for the whole run, a guard against a hung worker only: each
# condition's work is bounded in CPU seconds, so the verdict does not depend on
# how loaded the machine is (at 280 s, a machine at load 13 timed out 9 of 22).
DEFAULT_MAX_SECONDS = 1200.0
DEFAULT_JOBS = 2

# Outcomes of one postcondition, worst last.
PASSED = ("confirmed", "unknown")


@dataclass(frozen=True)
class Task:
    """One postcondition of one function in one model file."""

    group: str  # tasks of a group stop together under fail-fast
    model: Path
    function: str
    index: int  # position among the function's ``post:`` lines
    line: int
    source: str


@dataclass
class TaskResult:
    task: Task
    status: str  # confirmed | unknown | refuted | error | timeout | skipped
    messages: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall clock of the worker
    paths: int = 0  # executions CrossHair tried
    confirmed_paths: int = 0  # of those, the ones that met the preconditions and held
    cpu: float = 0.0  # CPU seconds of the analysis
    bounds: str | None = None  # the input space, in bounded mode
    space: int | None = None  # how many states that space has


@dataclass
class GroupResult:
    group: str
    results: list[TaskResult]
    seconds_to_find: float | None  # wall seconds of the group's tasks up to the first refutation

    @property
    def refuted(self) -> bool:
        return any(r.status == "refuted" for r in self.results)

    @property
    def passed(self) -> bool:
        return all(r.status in PASSED for r in self.results)


# ----------------------------------------------------------------- enumeration


def contracted_functions(model: Path) -> dict[str, list[tuple[int, str]]]:
    """Top-level functions of ``model`` with their ``post:`` lines (line, text)."""
    tree = ast.parse(model.read_text(), filename=str(model))
    found: dict[str, list[tuple[int, str]]] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        doc = ast.get_docstring(node, clean=False)
        if doc is None:
            continue
        first = node.body[0].lineno  # the docstring's first line
        posts = [
            (first + offset, text.strip()[len("post:") :].strip())
            for offset, text in enumerate(doc.splitlines())
            if text.strip().startswith("post:")
        ]
        if posts:
            found[node.name] = posts
    return found


def tasks_for(group: str, model: Path, functions: Sequence[str] | None = None) -> list[Task]:
    contracted = contracted_functions(model)
    names = list(contracted) if functions is None else list(functions)
    missing = [name for name in names if name not in contracted]
    if missing:
        raise ValueError(f"{model}: no postconditions on {', '.join(missing)}")
    return [
        Task(group, model, name, index, line, source)
        for name in names
        for index, (line, source) in enumerate(contracted[name])
    ]


# ---------------------------------------------------------------- state factory


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
}
# The bounds each contracted function is checked under in ``--mode bounded``
# (docs/proofs.md gives, per condition, the measured paths per second and why
# the bounds are what they are). Observers take only a state: the widest
# space. Reads add a key list; put adds a batch and two key lists, whose
# product with the states is too large to exhaust in a time box, so its
# space is the smallest that still holds eviction, pins and terminal moves.
BOUNDS: dict[str, Bounds] = {
    "new": Bounds(ints=tuple(range(-1, 9))),
    "close": Bounds(),
    "flush": Bounds(),
    "length": Bounds(),
    "stats": Bounds(),
    "contains": Bounds(capacities=(1, 2)),
    "get_concatenated": Bounds(capacities=(1, 2), keys=("a", "b")),
    "read_into": Bounds(capacities=(1, 2), keys=("a", "b"), dangling=0, ints=(0, 1, 2)),
    "put": Bounds(capacities=(1, 2), keys=("a", "b"), payloads=(b"p", b"q", b"pq")),
}
# CPU seconds per condition in ``--mode bounded`` where the default would cut
# an exhaustible space short (measured: about 70-110 paths per CPU second) or,
# for put, where no time box exhausts it and the search gets a shorter one.
TIME_BOXES: dict[str, float] = {"get_concatenated": 20.0, "read_into": 40.0, "put": 5.0}
# Functions whose bounded space no time box here exhausts (docs/proofs.md).
UNBOUNDED_SEARCHES = frozenset({"put"})


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
    if _is_remote(model):
        core.register_type(state_type, lambda factory: make_remote_state(state_type, factory, bounds.keys))
    else:
        core.register_type(state_type, lambda factory: make_bounded_state(state_type, factory, bounds))
    proxies = getattr(core, "_SIMPLE_PROXIES", None)
    if not isinstance(proxies, dict) or not all(typ in proxies for typ in (str, bytes, int, tuple, Union)):
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
    if _is_remote(model):
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


# ---------------------------------------------------------------------- worker


def _load_model(path: Path) -> ModuleType:
    if path.resolve() == Path(sequential.__file__).resolve():
        return sequential
    # A copy (e.g. with a planted bug): its own module, registered before
    # exec because dataclasses look their module up in sys.modules.
    name = "_auxspec_checked_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


MODES = ("bounded", "open", "none")


def run_worker(model_path: Path, function: str, index: int, timeout: float, mode: str) -> dict[str, Any]:
    """Analyse one postcondition in this process; the result as JSON data.

    ``mode``: ``bounded`` (every input from ``BOUNDS[function]``, so the
    space is finite and can be exhausted), ``open`` (``register_factories``:
    biased towards small colliding values, but any value is reachable, so it
    can never be exhausted) or ``none`` (CrossHair's own values). ``paths``
    counts the executions CrossHair tried, ``confirmed_paths`` those that met
    the preconditions and satisfied the condition.
    """
    from time import process_time

    from crosshair import core
    from crosshair.condition_parser import condition_parser
    from crosshair.core_and_libs import MessageType, analyze_function
    from crosshair.fnutil import FunctionInfo
    from crosshair.options import AnalysisKind, AnalysisOptionSet
    from crosshair.statespace import VerificationStatus

    module = _load_model(model_path)
    install_ordered_dict()
    bounds = BOUNDS.get(function, Bounds()) if mode == "bounded" else None
    if bounds is not None:
        register_bounded(module, bounds)
    elif mode == "open":
        register_factories(module)
    options = AnalysisOptionSet(analysis_kind=[AnalysisKind.PEP316], per_condition_timeout=timeout)
    checkables = list(analyze_function(FunctionInfo.from_module(module, function), options))
    if index >= len(checkables):
        return {"status": "error", "messages": [f"{function} has only {len(checkables)} checkable conditions"]}
    checkable = checkables[index]
    if not isinstance(checkable, core.ConditionCheckable):
        return {"status": "error", "messages": [f"{function} post[{index}] is not a condition: {checkable!r}"]}
    paths = 0
    attempt = core.attempt_call

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal paths
        paths += 1
        return attempt(*args, **kwargs)

    core.attempt_call = counted
    started = process_time()
    checkable.options.deadline = started + timeout
    try:
        with condition_parser(checkable.options.analysis_kind):
            analysis = core.analyze_calltree(checkable.options, checkable.conditions)
    finally:
        core.attempt_call = attempt
    cpu = process_time() - started
    messages = list(analysis.messages)
    if any(m.state in (MessageType.POST_FAIL, MessageType.EXEC_ERR) for m in messages):
        status = "refuted"
    elif messages:
        status = "error"  # the postcondition raised, or no input met the precondition, or a syntax error
    elif analysis.verification_status == VerificationStatus.CONFIRMED:
        status = "confirmed"
    else:
        status = "unknown"
    return {
        "status": status,
        "messages": [f"{m.filename}:{m.line}: {m.state.value}: {m.message}" for m in messages],
        "paths": paths,
        "confirmed_paths": analysis.num_confirmed_paths,
        "cpu": round(cpu, 2),
        "bounds": None if bounds is None else _described(module, bounds, function),
        "space": None if bounds is None or _is_remote(module) else bounds.states(),
    }


def _is_remote(model: ModuleType) -> bool:
    return getattr(model, "PROFILE", None) == "remote"


def _described(model: ModuleType, bounds: Bounds, function: str) -> str:
    """``bounds.describe``, with the states ``make_remote_state`` builds for the remote model."""
    text = bounds.describe(function)
    if not _is_remote(model):
        return text
    stored = [math.comb(len(bounds.keys), n) * 2**n for n in range(len(bounds.keys) + 1)]  # by how many are stored
    count = 1 + sum(ways * (1 + (n >= 2) + (n > 2)) for n, ways in enumerate(stored))  # closed, then gone sets
    states = (
        f"remote states: closed, or keys {''.join(bounds.keys)} each absent or stored (2 payloads), "
        f"at most one gone set ({count} states)"
    )
    return re.sub(r"^states: [^;]*", states, text).replace("; each profile", "")  # the remote model has one


# ------------------------------------------------------------------- scheduler


@dataclass
class _Running:
    task: Task
    process: subprocess.Popen[str]
    started: float


def _spawn(task: Task, timeout: float, mode: str) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "auxspec.checks.crosshair",
        "--worker",
        str(task.model),
        task.function,
        str(task.index),
        str(timeout),
        "--mode",
        mode,
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(running: _Running, now: float) -> TaskResult:
    out, err = running.process.communicate()
    seconds = now - running.started
    lines = out.strip().splitlines()
    if running.process.returncode != 0 or not lines:
        tail = (err or out).strip().splitlines()[-15:]
        return TaskResult(running.task, "error", [f"worker exited {running.process.returncode}", *tail], seconds)
    data = json.loads(lines[-1])
    return TaskResult(
        running.task,
        str(data["status"]),
        [str(m) for m in data["messages"]],
        seconds,
        int(data.get("paths", 0)),
        int(data.get("confirmed_paths", 0)),
        float(data.get("cpu", 0.0)),
        data.get("bounds"),
        data.get("space"),
    )


def _stop(running: _Running, status: str, now: float) -> TaskResult:
    running.process.kill()
    running.process.communicate()
    return TaskResult(running.task, status, [], now - running.started)


def run_tasks(
    tasks: Sequence[Task],
    *,
    condition_timeout: float = DEFAULT_CONDITION_TIMEOUT,
    jobs: int = DEFAULT_JOBS,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    fail_fast: bool = False,
    mode: str = "open",
    timeouts: Mapping[str, float] | None = None,
    on_result: Callable[[TaskResult], None] | None = None,
) -> list[TaskResult]:
    """Run ``tasks`` in worker processes, ``jobs`` at a time, in order.

    A worker gets ``condition_timeout`` CPU seconds (or ``timeouts`` of its
    function) from CrossHair and is
    killed after five times that plus a minute in wall time (the machine may be loaded);
    everything still running after ``max_seconds`` is killed. With
    ``fail_fast``, the first refutation in a group stops the group's other
    tasks.
    """
    def box(task: Task) -> float:
        return (timeouts or {}).get(task.function, condition_timeout)

    start = time.monotonic()
    pending = list(tasks)
    running: list[_Running] = []
    results: list[TaskResult] = []
    refuted: set[str] = set()

    def record(result: TaskResult) -> None:
        results.append(result)
        if result.status == "refuted":
            refuted.add(result.task.group)
        if on_result is not None:
            on_result(result)

    while pending or running:
        now = time.monotonic()
        for item in list(running):
            if item.process.poll() is not None:
                running.remove(item)
                record(_finish(item, now))
            elif now - start > max_seconds or now - item.started > 5 * box(item.task) + 60:
                running.remove(item)
                record(_stop(item, "timeout", now))
            elif fail_fast and item.task.group in refuted:
                running.remove(item)
                record(_stop(item, "skipped", now))
        if fail_fast:
            for task in [t for t in pending if t.group in refuted]:
                pending.remove(task)
                record(TaskResult(task, "skipped"))
        if now - start > max_seconds:
            for task in pending:
                record(TaskResult(task, "timeout", ["overall time limit reached before it started"]))
            pending.clear()
        while pending and len(running) < jobs:
            task = pending.pop(0)
            running.append(_Running(task, _spawn(task, box(task), mode), time.monotonic()))
        if running:
            time.sleep(0.05)
    return results


def check_models(
    models: Mapping[str, tuple[Path, Sequence[str] | None]],
    **options: Any,
) -> dict[str, GroupResult]:
    """Check several model files, each a group: ``{group: (path, functions)}``.

    Tasks of different groups are interleaved so a slow group does not hold
    up the rest; ``options`` go to ``run_tasks``.
    """
    per_group = [
        sorted(tasks_for(group, path, functions), key=lambda task: -_breadth(task.source))
        for group, (path, functions) in models.items()
    ]
    order = [task for round_ in _round_robin(per_group) for task in round_]
    results = run_tasks(order, **options)
    grouped: dict[str, GroupResult] = {}
    for group, tasks in zip(models, per_group, strict=True):
        mine = [r for r in results if r.task.group == group]
        mine.sort(key=lambda r: tasks.index(r.task))
        seconds: float | None = None
        spent = 0.0
        for result in mine:
            spent += result.seconds
            if result.status == "refuted":
                seconds = spent
                break
        grouped[group] = GroupResult(group, mine, seconds)
    return grouped


def _breadth(source: str) -> int:
    """How many names a postcondition relates: the broadest say the most
    about a result, so under fail-fast they go first."""
    return len({node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)})


def _round_robin(lists: Sequence[Sequence[Task]]) -> Iterable[list[Task]]:
    depth = max((len(items) for items in lists), default=0)
    for i in range(depth):
        yield [items[i] for items in lists if i < len(items)]


# ------------------------------------------------------------------------- CLI


def _parse_target(target: str) -> tuple[Path, list[str] | None]:
    """``FILE``, ``FUNCTION`` (of the model) or ``FILE:FUNCTION[,FUNCTION]``."""
    if target.endswith(".py"):
        return Path(target), None
    if ":" in target:
        path, names = target.rsplit(":", 1)
        return Path(path), names.split(",")
    return MODEL_PATH, target.split(",")


def _describe(result: TaskResult) -> str:
    task = result.task
    head = f"{task.model.name}:{task.line}: {task.function} post[{task.index}] {result.status}"
    if result.status in ("confirmed", "unknown", "refuted"):
        head += f" after {result.paths} paths ({result.confirmed_paths} held) in {result.cpu:.1f} CPU s"
    else:
        head += f" in {result.seconds:.1f}s"
    if result.bounds is not None:
        head += f"; bounds: {result.bounds}"
    return "\n".join([head, *("    " + m for m in result.messages)])


def summary(results: Sequence[TaskResult], mode: str) -> str:
    """The run's claim, in words that say what was and was not proved."""
    confirmed = [r for r in results if r.status == "confirmed"]
    unknown = [r for r in results if r.status == "unknown"]
    refuted = [r for r in results if r.status == "refuted"]
    other = [r for r in results if r.status not in ("confirmed", "unknown", "refuted")]
    within = "within the bounds printed with each" if mode == "bounded" else "over every input"
    parts = [
        f"{len(confirmed)} confirmed (every path explored, so they hold {within})",
        f"{len(unknown)} unknown (time box reached after {sum(r.paths for r in unknown)} paths without a "
        "counterexample; not a proof)",
        f"{len(refuted)} refuted",
    ]
    if other:
        parts.append(", ".join(f"{sum(r.status == s for r in other)} {s}" for s in sorted({r.status for r in other})))
    return f"{len(results)} conditions, {mode} inputs: " + "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m auxspec.checks.crosshair",
        description="CrossHair (PEP 316) over every contract of the auxspec model.",
    )
    parser.add_argument(
        "--target", action="append", help="FILE, FUNCTION or FILE:FUNCTION[,...] (default: models/sequential.py)"
    )
    parser.add_argument("--budget", type=float, help="wall seconds to aim for; sets the per-condition timeout")
    parser.add_argument("--per-condition-timeout", type=float, help=f"CPU s (default {DEFAULT_CONDITION_TIMEOUT})")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("AUXSPEC_CROSSHAIR_JOBS", DEFAULT_JOBS)))
    parser.add_argument("--max-seconds", type=float, default=DEFAULT_MAX_SECONDS, help="hard wall-clock limit")
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="bounded",
        help="bounded: inputs from finite bounds, so conditions can be confirmed (default); open: small values "
        "favoured but any reachable; none: CrossHair's own values",
    )
    parser.add_argument("--worker", nargs=4, metavar=("MODEL", "FUNCTION", "INDEX", "TIMEOUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        model, function, index, timeout = args.worker
        data = run_worker(Path(model), function, int(index), float(timeout), args.mode)
        print(json.dumps(data))
        return 0

    targets = [_parse_target(t) for t in args.target or [str(MODEL_PATH)]]
    tasks = [task for path, names in targets for task in tasks_for(str(path), path, names)]
    jobs = max(1, args.jobs)
    if args.per_condition_timeout is not None:
        timeout = args.per_condition_timeout
    elif args.budget is not None:
        # Workers overlap `jobs` at a time; keep some slack for start-up.
        timeout = max(1.0, 0.8 * args.budget * jobs / max(1, len(tasks)))
    else:
        timeout = DEFAULT_CONDITION_TIMEOUT
    if args.mode == "bounded":
        # Cheapest first, so a loaded machine's hard limit cuts the searches, not the proofs.
        tasks.sort(key=lambda task: (task.function in UNBOUNDED_SEARCHES, TIME_BOXES.get(task.function, timeout)))
    boxes = "".join(f", {f} {t:g}" for f, t in TIME_BOXES.items()) if args.mode == "bounded" else ""
    print(
        f"CrossHair PEP 316 ({args.mode} inputs): {len(tasks)} postconditions, {timeout:.1f} CPU s each{boxes}, "
        f"{jobs} at a time, hard limit {args.max_seconds:.0f} s",
        flush=True,
    )
    start = time.monotonic()
    results = run_tasks(
        tasks,
        condition_timeout=timeout,
        jobs=jobs,
        max_seconds=args.max_seconds,
        mode=args.mode,
        timeouts=TIME_BOXES if args.mode == "bounded" and args.per_condition_timeout is None else None,
        on_result=lambda result: print(_describe(result), flush=True),
    )
    elapsed = time.monotonic() - start
    failed = [r for r in results if r.status not in PASSED]
    verdict = "FAILED" if failed else "ok"
    print(f"CrossHair {verdict}: {summary(results, args.mode)}; elapsed {elapsed:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
