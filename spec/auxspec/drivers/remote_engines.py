"""The engines a ``remote`` verify runs against, and how one is chosen.

Each engine (``drivers.redis_engine``, ``drivers.mooncake_engine``) gives
verify the same four things: where it is (said in the report), how many
objects it evicted on its own so far (its own counter), an adversary that
deletes the running trace's objects between calls as the engine may
(``Evictor``), and the model options it is judged under (section 13.1 of
docs/semantics.md: Mooncake Store publishes a refused batch in part and may
fail a read of stored objects; Redis does neither).

Which engine: ``--engine redis|mooncake``, or else the one whose variable is
set (``AUXSTORE_REDIS_URL``, ``AUXSTORE_MOONCAKE_MASTER``); neither or both
set without ``--engine`` is one line and exit 2, before anything runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

from auxspec.models import remote

ENGINES = ("redis", "mooncake")
# What each model option is called in reports and counterexample files, and how the model takes it.
OPTIONS = {"partial_puts": remote.partial_puts, "transient_misses": remote.transient_misses}


class EngineUnavailable(LookupError):
    """No engine to verify against: no variable set, no client installed, or
    the engine does not answer. Its message is one line."""


class Evictor(Protocol):
    """Deletes objects of the running trace's store before its calls, seeded."""

    rate: float
    deleted: int  # objects deleted between calls, over the run
    refused: int  # deletions the engine refused (a Mooncake object leased by a read, rule M3)

    def start(self, seed: int) -> None: ...

    def strike(self) -> None: ...

    def finish(self) -> None: ...

    def refusals(self) -> str:
        """What the engine refused to delete, a line of the report ('' if nothing)."""
        ...


class Engine(Protocol):
    name: str  # one of ENGINES
    address: str  # where it is, as the report says it
    options: tuple[str, ...]  # keys of OPTIONS: the model options it is judged under
    counter: str  # what ``evicted`` reads, as the report names it

    def evicted(self) -> int:
        """The objects the engine itself evicted so far (its own counter)."""
        ...

    def evictor(self, rate: float | None = None) -> Evictor: ...

    def close(self) -> None: ...


@contextlib.contextmanager
def judged_with(options: tuple[str, ...]) -> Iterator[None]:
    """The model takes ``options`` inside this block (``remote.new`` reads them)."""
    with contextlib.ExitStack() as stack:
        for name in options:
            stack.enter_context(OPTIONS[name]())
        yield


def say_options(options: tuple[str, ...]) -> str:
    return ", ".join(options) if options else "none (the plain remote profile)"


def choose(name: str | None, environ: Any) -> str:
    """The engine ``--engine`` names, or the one whose variable is set.

    raises: EngineUnavailable"""
    from auxspec.drivers import mooncake_engine, redis_engine

    if name is not None:
        if name not in ENGINES:
            raise EngineUnavailable(f"--engine {name!r}: one of {', '.join(ENGINES)}")
        return name
    variables = {"redis": redis_engine.URL_VARIABLE, "mooncake": mooncake_engine.MASTER_VARIABLE}
    named = [engine for engine, variable in variables.items() if environ.get(variable)]
    if len(named) == 1:
        return named[0]
    if named:
        raise EngineUnavailable(
            f"--profile remote: both {' and '.join(variables.values())} are set: choose with --engine redis|mooncake"
        )
    raise EngineUnavailable(
        f"--profile remote needs an engine: set {redis_engine.URL_VARIABLE} (a Redis server, e.g. "
        f"redis://127.0.0.1:6379/0) or {mooncake_engine.MASTER_VARIABLE} and {mooncake_engine.METADATA_VARIABLE} "
        "(a Mooncake master); see docs/remote.md"
    )


def connect(name: str | None, environ: Any) -> Engine:
    """The engine chosen (``choose``), connected and answering.

    raises: EngineUnavailable"""
    from auxspec.drivers import mooncake_engine, redis_engine

    chosen = choose(name, environ)
    if chosen == "redis":
        return redis_engine.RedisEngine.connect(environ)
    return mooncake_engine.MooncakeEngine.connect(environ)
