"""A reusable differential Hypothesis state machine: any store against the spec.

The machine drives a target store and a ``ReferenceStore`` of the same profile
with the same calls: puts with pins before data, repeated keys (a bundle),
capacities 1 to 6, object sizes 1 to 16, stores where everything is pinned,
over-releases, reads of missing keys, calls after close and, under
``strict``, invalid input of every class (non-``str`` keys, payloads of the
wrong length or type, key lists given as a ``str``, objects without ``key``
and ``payload``, short, read-only and non-contiguous buffers, bad
constructor sizes). After every step it compares the outcome (the value, or
the error kind through ``binding.classify``), the whole snapshot, the model
invariant (``model.check``) and, when the target has one,
``target.check_invariants()``. A difference raises :class:`Divergence`, which
Hypothesis shrinks to a minimal sequence of calls.

Reusing it for a port takes a few lines::

    from hypothesis import settings
    from auxspec.stateful import differential_machine

    MyStoreMachine = differential_machine(
        lambda max_bytes, object_nbytes: MyStore(max_bytes=max_bytes, object_nbytes=object_nbytes),
        profile="strict",
    )
    TestMyStore = MyStoreMachine.TestCase  # collected by pytest / unittest
    TestMyStore.settings = settings(max_examples=500, stateful_step_count=50, deadline=None)

or, to keep state of your own, subclass :class:`DifferentialMachine` and
define ``make_target(max_bytes, object_nbytes)`` (and ``observe(target)`` when
the target has no ``snapshot()`` method; vLLM's module, for instance, is
observed with ``auxspec.targets.observe_vllm``). ``read_into``, ``len``,
``in``, ``stats`` and ``flush`` are compared only when the target has them.
Under ``upstream`` only inputs that profile defines are generated (reads get
a list or tuple of keys, never a one-pass iterator: vLLM iterates the keys
twice, so an iterator's keys are read but not moved).
"""

from __future__ import annotations

import array
from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from auxspec import binding, model
from auxspec.reference import ReferenceStore
from auxstore import BlockObject, StoreSnapshot

__all__ = ["DifferentialMachine", "Divergence", "Factory", "differential_machine"]

Factory = Callable[[int, int], Any]
Observer = Callable[[Any], StoreSnapshot]


class Divergence(AssertionError):
    """The target did something the spec does not."""


class _Missing:
    """An object with neither ``key`` nor ``payload``."""

    def __repr__(self) -> str:
        return "<object without key and payload>"


class _KeyOnly:
    def __init__(self, key: str) -> None:
        self.key = key

    def __repr__(self) -> str:
        return f"<object with key {self.key!r} and no payload>"


# Keys: a small alphabet so they repeat, plus a few awkward valid ones.
_KEYS = st.one_of(st.text(alphabet="abcde", min_size=1, max_size=2), st.sampled_from(["", "é", "k\x00", "0"]))
_NOT_STR_KEYS: tuple[object, ...] = (1, True, None, b"a", ("a",), 2.5)
_NOT_PAYLOADS: tuple[object, ...] = ("text", 3, None, [1, 2], object())


def _outcome(op: str, call: Callable[[], Any]) -> tuple[str, Any, BaseException | None]:
    """``("ok", value, None)`` or ``("err", kind, exception)``."""
    try:
        return "ok", call(), None
    except Exception as error:
        return "err", binding.classify(op, error), error


class DifferentialMachine(RuleBasedStateMachine):
    """Compares ``make_target(...)`` with ``ReferenceStore(profile=profile)``."""

    profile: ClassVar[str] = "strict"
    # Whether a target's exceptions must be (by class name) the ones
    # binding.exception_for gives; None means "under strict only".
    exact_exceptions: ClassVar[bool | None] = None

    keys = Bundle("keys")

    def make_target(self, max_bytes: int, object_nbytes: int) -> Any:
        """The store under test, made with vLLM's constructor arguments."""
        raise NotImplementedError("subclass DifferentialMachine and define make_target, or use differential_machine()")

    def observe(self, target: Any) -> StoreSnapshot:
        """Everything observable about ``target``, without changing it."""
        snapshot: StoreSnapshot = target.snapshot()
        return snapshot

    # --------------------------------------------------------------- set-up

    @initialize(
        target=keys,
        capacity=st.integers(1, 6),
        object_nbytes=st.integers(1, 16),
        slack=st.integers(0, 15),
        first=_KEYS,
    )
    def setup(self, capacity: int, object_nbytes: int, slack: int, first: str) -> str:
        # The slack checks that capacity is max_bytes // object_nbytes.
        max_bytes = capacity * object_nbytes + slack % object_nbytes
        self.reference = ReferenceStore(max_bytes=max_bytes, object_nbytes=object_nbytes, profile=self.profile)
        self.target = self.make_target(max_bytes, object_nbytes)
        self.nbytes = object_nbytes
        self.serial = 0
        self.steps: list[str] = []
        return first

    @property
    def strict(self) -> bool:
        return self.profile == "strict"

    # -------------------------------------------------------------- drawing

    def _key(self, data: st.DataObject) -> str:
        """A key used before (in the bundle, stored, or referenced) or a new one."""
        state = self.reference.state
        pools: list[st.SearchStrategy[str]] = [self.keys, _KEYS]
        if state.entries:
            pools.append(st.sampled_from([key for key, _ in state.entries]))
        if state.refs:
            pools.append(st.sampled_from([key for key, _ in state.refs]))
        return data.draw(st.one_of(pools))

    def _payload(self) -> bytes:
        # Distinct payloads, so a read of the wrong slot is seen.
        self.serial += 1
        stamp = (self.serial * 2654435761 % 2**32).to_bytes(4, "big")
        return (stamp * self.nbytes)[: self.nbytes]

    def _object(self, data: st.DataObject, allow_invalid: bool) -> object:
        key: object = self._key(data)
        valid = self._payload()
        payload: object = valid
        if not (allow_invalid and self.strict):
            return BlockObject(key=key, payload=payload)  # type: ignore[arg-type]
        form = data.draw(
            st.sampled_from(
                ["bytes"] * 40
                + ["bytearray", "memoryview", "array"]
                + ["short", "long", "not_bytes", "not_str", "missing", "key_only"]
            )
        )
        if form == "bytearray":
            payload = bytearray(valid)
        elif form == "memoryview":
            payload = memoryview(valid)
        elif form == "array":
            payload = array.array("B", valid)
        elif form == "short":
            payload = valid[:-1]
        elif form == "long":
            payload = valid + b"\x00"
        elif form == "not_bytes":
            payload = data.draw(st.sampled_from(_NOT_PAYLOADS))
        elif form == "not_str":
            key = data.draw(st.sampled_from(_NOT_STR_KEYS))
        elif form == "missing":
            return _Missing()
        elif form == "key_only":
            return _KeyOnly(key)  # type: ignore[arg-type]
        return BlockObject(key=key, payload=payload)  # type: ignore[arg-type]

    def _key_list(
        self, data: st.DataObject, keys: list[str], allow_invalid: bool = True, one_pass: bool = True
    ) -> tuple[Callable[[], Any], str]:
        """A maker of fresh copies of ``keys`` (a generator is consumed once)
        in a shape drawn here, under strict sometimes an invalid one; and its
        description."""
        shapes = ["list"] * 20 + ["tuple"] + (["generator"] if one_pass else [])
        if allow_invalid and self.strict:
            shapes += ["str", "not_iterable", "not_str_item"]
        shape = data.draw(st.sampled_from(shapes))
        if shape == "tuple":
            return (lambda: tuple(keys)), repr(tuple(keys))
        if shape == "generator":
            return (lambda: (key for key in keys)), f"iter({keys!r})"
        if shape == "str":
            text = "".join(keys) or "a"
            return (lambda: text), repr(text)
        if shape == "not_iterable":
            return (lambda: 7), "7"
        if shape == "not_str_item":
            bad = data.draw(st.sampled_from(_NOT_STR_KEYS))
            at = data.draw(st.integers(0, len(keys)))
            with_bad = [*keys[:at], bad, *keys[at:]]
            return (lambda: list(with_bad)), repr(with_bad)
        return (lambda: list(keys)), repr(keys)

    # ------------------------------------------------------------ comparing

    def _compare(self, op: str, describe: str, on_reference: Callable[[], Any], on_target: Callable[[], Any]) -> None:
        self.steps.append(describe)
        expected = _outcome(op, on_reference)
        got = _outcome(op, on_target)
        if expected[0] == "err" and expected[1] is None:
            raise AssertionError(f"the reference raised an unclassified {expected[2]!r} on {describe}")
        if got[:2] != expected[:2]:
            raise Divergence(
                f"{describe}: spec gives {self._show(expected)}, target gives {self._show(got)}"
                f"\nsteps so far:\n  " + "\n  ".join(self.steps)
            )
        if got[0] == "err" and self._exact():
            wanted = type(binding.exception_for(expected[1], self.profile, ""))
            names = {cls.__name__ for cls in type(got[2]).__mro__}
            if wanted.__name__ not in names:
                raise Divergence(f"{describe}: target raised {got[2]!r}, expected a {wanted.__name__}")

    def _exact(self) -> bool:
        return self.strict if self.exact_exceptions is None else self.exact_exceptions

    @staticmethod
    def _show(outcome: tuple[str, Any, BaseException | None]) -> str:
        if outcome[0] == "ok":
            return f"ok {outcome[1]!r}"
        return f"error {outcome[1]} ({outcome[2]!r})"

    @invariant()
    def same_state(self) -> None:
        state = self.reference.state
        if not model.check(state):
            raise AssertionError(f"the reference broke the model invariant: {model.violations(state)}")
        got = self.observe(self.target)
        expected = self.reference.snapshot()
        if tuple(got) != tuple(expected):
            raise Divergence(
                f"after {self.steps[-1] if self.steps else 'construction'}: spec state {expected}, "
                f"target state {got}\nsteps so far:\n  " + "\n  ".join(self.steps)
            )
        check = getattr(self.target, "check_invariants", None)
        if check is not None:
            check()

    # ---------------------------------------------------------------- rules

    # put is the richest call, so three rules make it: any put (with invalid
    # input under strict), a valid put (fills the store, evicts), and a pin.
    @rule(target=keys, data=st.data())
    def put(self, data: st.DataObject) -> MultipleResults[str]:
        return self._put(data, allow_invalid=True, most_objects=4, most_pins=3)

    @rule(target=keys, data=st.data())
    def put_valid(self, data: st.DataObject) -> MultipleResults[str]:
        return self._put(data, allow_invalid=False, most_objects=4, most_pins=1)

    @rule(target=keys, data=st.data())
    def pin(self, data: st.DataObject) -> MultipleResults[str]:
        return self._put(data, allow_invalid=False, most_objects=1, most_pins=4)

    def _put(self, data: st.DataObject, allow_invalid: bool, most_objects: int, most_pins: int) -> MultipleResults[str]:
        objects = [self._object(data, allow_invalid) for _ in range(data.draw(st.integers(0, most_objects)))]
        retain = [self._key(data) for _ in range(data.draw(st.integers(0, most_pins)))]
        state = self.reference.state
        referenced = [key for key, _ in state.refs] + retain
        # Releases mostly name referenced keys, so they succeed; sometimes a
        # key twice (a count reaching zero, then below) or any key.
        release: list[str] = []
        for _ in range(data.draw(st.integers(0, most_pins))):
            pick_referenced = bool(referenced) and data.draw(st.integers(0, 5)) != 3
            release.append(data.draw(st.sampled_from(referenced)) if pick_referenced else self._key(data))
        make_objects, objects_text = self._batch(data, objects, allow_invalid)
        make_retain, retain_text = self._key_list(data, retain, allow_invalid)
        make_release, release_text = self._key_list(data, release, allow_invalid)
        describe = f"put({objects_text}, retain_keys={retain_text}, release_keys={release_text})"
        self._compare(
            "put",
            describe,
            lambda: self.reference.put(make_objects(), retain_keys=make_retain(), release_keys=make_release()),
            lambda: self.target.put(make_objects(), retain_keys=make_retain(), release_keys=make_release()),
        )
        named = [getattr(obj, "key", None) for obj in objects] + retain + release
        return multiple(*dict.fromkeys(key for key in named if isinstance(key, str)))

    def _batch(self, data: st.DataObject, objects: list[object], allow_invalid: bool) -> tuple[Callable[[], Any], str]:
        """Like ``_key_list``, for the batch of objects."""
        shapes = ["list"] * 20 + ["tuple", "generator"]
        if allow_invalid and self.strict:
            shapes += ["str", "not_iterable"]
        shape = data.draw(st.sampled_from(shapes))
        if shape == "tuple":
            return (lambda: tuple(objects)), repr(tuple(objects))
        if shape == "generator":
            return (lambda: (obj for obj in objects)), f"iter({objects!r})"
        if shape == "str":
            return (lambda: "ab"), "'ab'"
        if shape == "not_iterable":
            return (lambda: None), "None"
        return (lambda: list(objects)), repr(objects)

    def _read_keys(self, data: st.DataObject) -> list[str]:
        # Mostly stored keys, so that reads succeed and move keys.
        stored = [key for key, _ in self.reference.state.entries]
        return [
            data.draw(st.sampled_from(stored)) if stored and data.draw(st.integers(0, 5)) != 3 else self._key(data)
            for _ in range(data.draw(st.integers(0, 5)))
        ]

    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        make_keys, keys_text = self._key_list(data, self._read_keys(data), one_pass=self.strict)
        self._compare(
            "get",
            f"get_concatenated({keys_text})",
            lambda: self.reference.get_concatenated(make_keys()),
            lambda: self.target.get_concatenated(make_keys()),
        )

    @precondition(lambda self: hasattr(self.target, "read_into"))
    @rule(data=st.data())
    def read_into(self, data: st.DataObject) -> None:
        keys = self._read_keys(data)
        make_keys, keys_text = self._key_list(data, keys, one_pass=self.strict)
        size = max(0, len(keys) * self.nbytes + data.draw(st.integers(-self.nbytes, 3)))
        forms = ["bytearray"] * 12 + ["memoryview", "array", "words"]
        if self.strict:
            forms += ["bytes", "strided", "not_buffer"]
        form = data.draw(st.sampled_from(forms))
        buffers = [_buffer(form, size) for _ in range(2)]
        self._compare(
            "read_into",
            f"read_into({keys_text}, <{form} of {size} bytes>)",
            lambda: self.reference.read_into(make_keys(), buffers[0]),
            lambda: self.target.read_into(make_keys(), buffers[1]),
        )
        if _contents(buffers[0]) != _contents(buffers[1]):
            raise Divergence(f"read_into wrote {_contents(buffers[1])!r}, spec wrote {_contents(buffers[0])!r}")

    @rule(data=st.data())
    def close_or_look(self, data: st.DataObject) -> None:
        # Closing ends what a run can explore, so it is one draw in sixteen,
        # of a middle value (Hypothesis favours small and extreme ones).
        # Otherwise compare the observation API or, under strict, how
        # invalid constructor arguments are rejected.
        choice = data.draw(st.integers(0, 15))
        if choice == 9:
            self._compare("close", "close()", self.reference.close, self.target.close)
        elif choice >= 12 and self.strict:
            self._construct(
                data.draw(st.one_of(st.integers(-2, 40), st.sampled_from([True, 8.0, "8", None]))),
                data.draw(st.one_of(st.integers(-2, 20), st.sampled_from([False, True, 4.0, None]))),
            )
        else:
            key: object = self._key(data) if data.draw(st.booleans()) else data.draw(st.sampled_from(_NOT_STR_KEYS))
            looks: list[tuple[str, Callable[[Any], Any]]] = [
                ("len", len),
                (f"{key!r} in store", lambda store: key in store),
                ("stats()", lambda store: store.stats()),
                ("flush()", lambda store: store.flush()),
            ]
            needs = {"len": "__len__", "stats()": "stats", "flush()": "flush"}
            for describe, look in looks:
                if hasattr(self.target, needs.get(describe, "__contains__")):
                    self._look(describe, look)

    def _look(self, describe: str, look: Callable[[Any], Any]) -> None:
        self._compare("look", describe, lambda: look(self.reference), lambda: look(self.target))

    def _construct(self, max_bytes: object, object_nbytes: object) -> None:
        # Made with the target's own factory; a store made here is closed at
        # once, since only the outcome matters.
        def build(make: Callable[[Any, Any], Any]) -> None:
            store = make(max_bytes, object_nbytes)
            store.close()

        self._compare(
            "new",
            f"new(max_bytes={max_bytes!r}, object_nbytes={object_nbytes!r})",
            lambda: build(lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n, profile=self.profile)),
            lambda: build(self.make_target),
        )


def _buffer(form: str, size: int) -> Any:
    pattern = bytes([0xA5]) * size
    if form == "memoryview":
        return memoryview(bytearray(pattern))
    if form == "array":
        return array.array("B", pattern)
    if form == "words":  # a multi-byte format: written as its raw bytes
        return array.array("H", bytes([0xA5]) * (size + size % 2))
    if form == "bytes":
        return pattern
    if form == "strided":
        return memoryview(bytearray(pattern * 2))[::2]
    if form == "not_buffer":
        return "not a buffer"
    return bytearray(pattern)


def _contents(buffer: Any) -> object:
    return buffer.tobytes() if hasattr(buffer, "tobytes") else bytes(buffer) if not isinstance(buffer, str) else buffer


def differential_machine(
    factory: Factory,
    *,
    profile: str = "strict",
    observe: Observer | None = None,
    name: str = "DifferentialStoreMachine",
) -> type[DifferentialMachine]:
    """A machine class comparing ``factory(max_bytes, object_nbytes)`` with the
    spec under ``profile``; its ``.TestCase`` is a unittest test case.

    ``observe(target)`` gives the target's snapshot; by default
    ``target.snapshot()``.
    """
    if profile not in model.PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of {model.PROFILES}")

    def make_target(self: DifferentialMachine, max_bytes: int, object_nbytes: int) -> Any:
        return factory(max_bytes, object_nbytes)

    namespace: dict[str, Any] = {"profile": profile, "make_target": make_target}
    if observe is not None:
        namespace["observe"] = lambda self, target: observe(target)
    return type(name, (DifferentialMachine,), namespace)
