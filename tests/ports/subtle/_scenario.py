"""Plays a port's ``SCENARIO`` (its docstring's call sequence) on a store and
records each step's outcome, so a test can compare a port with the spec's
reference and with the correct store it was derived from.

Steps: ``("new", max_bytes, object_nbytes)`` (its outcome ``("ok", None)``, or
the error kind when the store cannot be built); ``("bg", max_bytes,
object_nbytes, max_pending_batches)`` (a background store over a store whose
writer the scenario holds and lets go); ``("put", objects[, retains,
releases])`` with ``objects`` as ``(key, payload)`` pairs; ``("get", keys)``;
``("read_into", keys, buffer_size)``; ``("close",)``; ``("do", fn)`` (``fn``
gets the store, its return value is the outcome); and, for the held writer,
``("hold",)``, ``("started", n)`` (wait until the writer has begun its n-th
batch), ``("allow", n)`` (let n more batches through) and ``("allow_later",
n, seconds)`` (the same from a timer, for a put that may block).

An outcome is ``("ok", value)`` or ``("err", kind)``; a background put's
outcome is ``None`` and not compared (a put may or may not see a failure
that is still in flight).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from auxstore import BlockObject

Outcome = tuple[str, Any] | None
Step = tuple[Any, ...]


def kind(error: BaseException) -> str:
    """The error kind, by class name, as verify sees it."""
    names = {cls.__name__ for cls in type(error).__mro__}
    for name, label in (
        ("KeyError", "unreferenced"),
        ("BlockObjectStoreError", "store"),
        ("RuntimeError", "closed"),
        ("TypeError", "type"),
        ("ValueError", "value"),
    ):
        if name in names:
            return label
    return type(error).__name__


class Gated:
    """An inner store whose puts wait for the scenario's permission (when held)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.tokens: threading.Semaphore | None = None
        self.started = 0
        self.cv = threading.Condition()

    @property
    def object_nbytes(self) -> int:
        return int(self.inner.object_nbytes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        with self.cv:
            self.started += 1
            self.cv.notify_all()
        if self.tokens is not None and not self.tokens.acquire(timeout=10):
            raise TimeoutError("the scenario never let this batch through")
        self.inner.put(objects, retain_keys=retain_keys, release_keys=release_keys)

    def wait_started(self, count: int) -> None:
        with self.cv:
            if not self.cv.wait_for(lambda: self.started >= count, timeout=5):
                raise TimeoutError(f"the writer did not start batch {count}")

    def allow(self, count: int) -> None:
        if self.tokens is not None:
            for _ in range(count):
                self.tokens.release()


# (max_bytes, object_nbytes, max_pending or None) -> (store, gate or None)
Builder = Callable[[int, int, int | None], tuple[Any, Gated | None]]


def play(scenario: Sequence[Step], build: Builder) -> list[Outcome]:
    store: Any = None
    gate: Gated | None = None
    background = False
    outcomes: list[Outcome] = []
    timers: list[threading.Timer] = []

    def attempt(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
        try:
            return ("ok", call(*args, **kwargs))
        except Exception as error:  # the kind is the outcome
            return ("err", kind(error))

    try:
        for step in scenario:
            op = step[0]
            if op in ("new", "bg"):
                background = op == "bg"
                try:
                    store, gate = build(step[1], step[2], step[3] if background else None)
                except Exception as error:  # a store that cannot be built: its error kind is the outcome
                    store, gate = None, None
                    outcomes.append(("err", kind(error)))
                else:
                    outcomes.append(("ok", None))
            elif op == "hold":
                if gate is not None:
                    gate.tokens = threading.Semaphore(0)
                outcomes.append(None)
            elif op == "started":
                if gate is not None:
                    gate.wait_started(step[1])
                outcomes.append(None)
            elif op == "allow":
                if gate is not None:
                    gate.allow(step[1])
                outcomes.append(None)
            elif op == "allow_later":
                if gate is not None:
                    timer = threading.Timer(step[2], gate.allow, (step[1],))
                    timers.append(timer)
                    timer.start()
                outcomes.append(None)
            elif op == "put":
                objects = [BlockObject(key, payload) for key, payload in step[1]]
                retains = list(step[2]) if len(step) > 2 else []
                releases = list(step[3]) if len(step) > 3 else []
                result = attempt(store.put, objects, retain_keys=retains, release_keys=releases)
                outcomes.append(None if background else result)
            elif op == "get":
                outcomes.append(attempt(store.get_concatenated, list(step[1])))
            elif op == "read_into":
                outcomes.append(attempt(_read_into, store, list(step[1]), bytearray(step[2])))
            elif op == "close":
                outcomes.append(attempt(store.close))
            elif op == "do":
                outcomes.append(attempt(step[1], store))
            else:
                raise ValueError(f"unknown scenario step {step!r}")
    finally:
        if gate is not None:
            gate.allow(1000)
            gate.tokens = None
        for timer in timers:
            timer.cancel()
        if store is not None:
            with contextlib.suppress(Exception):  # cleanup only; the outcomes are recorded
                store.close()
    return outcomes


def _read_into(store: Any, keys: list[str], buffer: bytearray) -> tuple[int, bytes]:
    return store.read_into(keys, buffer), bytes(buffer)


def first_difference(expected: list[Outcome], actual: list[Outcome]) -> int | None:
    """The first step where both outcomes are recorded and differ."""
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if want is not None and got is not None and want != got:
            return index
    return None
