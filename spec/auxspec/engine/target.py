"""Targets: the store implementations verified against the spec, and how
each is found, built, driven and observed.

The main one is vLLM's module (``../shared/upstream/vllm_store.py`` next to the
repository, or wherever ``AUXSTORE_UPSTREAM`` points): the ground truth of the
``upstream`` profile. It is loaded by path, never vendored.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from auxspec.engine.ops import CORE, OBSERVE, PYTHON, READ_INTO, STATS, Features
from auxspec.models.sequential import Kind
from auxspec.reference.store import Snapshot as StoreSnapshot

Observe = Callable[[Any], StoreSnapshot | None]
Errors = tuple[tuple[type[BaseException], Kind], ...]
BUNDLED = "auxstore"  # the module verified when no target is named


class PortBroken(Exception):
    """A port process died, hung or broke the protocol. Once it has answered
    a request this is a counterexample like any other (it crashed, hung or
    answered garbage in mid-trace), and the next store starts a new process;
    ``at_start``: it never answered one, so it cannot be verified at all."""

    def __init__(self, message: str, at_start: bool = False) -> None:
        super().__init__(message)
        self.at_start = at_start


class NotRunnable(Exception):
    """The target could not get the memory a valid call needs (it raised
    ``MemoryError``, or a port process answered the protocol's ``resources``
    error). The spec defines no outcome for that, so the input is not judged:
    it is not runnable on this machine, never a divergence. ``trace``: the
    trace it was running, once known (for the bytes it needs)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.trace: Any = None
        self.detail = detail or message  # what the target raised or answered, as a divergence shows it


# A store smaller than this runs on any machine auxspec runs on: a target that
# fails one for memory has a bug (a size computed wrong), so that is judged a
# divergence; only a larger store's failure is "not runnable here".
MEMORY_FLOOR = 64 * 2**20


def needs_memory(trace: Any) -> bool:
    """Whether ``trace``'s store may need more memory than some machine has
    (``max_bytes`` at least ``MEMORY_FLOOR``, or a size that is no integer)."""
    return type(trace.max_bytes) is not int or trace.max_bytes >= MEMORY_FLOOR


def bytes_needed(trace: Any) -> int:
    """The most bytes a store of ``trace`` holds at once: its capacity or
    every distinct key its puts store, whichever is fewer, times the object
    size (what a store must be able to map to run it)."""
    nbytes, max_bytes = trace.object_nbytes, trace.max_bytes
    if type(nbytes) is not int or type(max_bytes) is not int or nbytes <= 0:
        return 0
    keys = {key for op in trace.ops if isinstance(getattr(op, "objects", None), tuple) for key, _ in op.objects}
    return min(max_bytes // nbytes, len(keys)) * nbytes


# (the ops to come, whether the state is observed after op i) -> (max_bytes, object_nbytes) -> store
Ahead = Callable[[tuple[Any, ...], Callable[[int], bool]], Callable[[Any, Any], Any]]


@dataclass(frozen=True)
class Target:
    """A store implementation to verify: how to build one, how to see its
    state without changing it (None when it cannot be seen), which ops it can
    be driven with, and its background store class, if it has one."""

    label: str
    factory: Callable[[Any, Any], Any]  # (max_bytes, object_nbytes) -> store
    observe: Observe | None
    # Which ops its traces may hold (auxspec.engine.ops.Features): vLLM's store
    # has no read_into and no observations; a port process gets no Python forms.
    features: Features = CORE
    background: Callable[..., Any] | None = None  # (inner, max_pending_batches=) -> background store
    # Compare the recency order of pinned keys too (not observable by calls;
    # see engine.compare.observed), for a port author who wants it checked.
    exact_order: bool = False
    # A port's own exception classes and the error kind each stands for,
    # tried before the structural rules of reference.binding.classify.
    errors: Errors = ()
    # A factory given the calls to come (a trace's ops, and after which of
    # them the state is observed), for a target that can send them ahead: a
    # port process that pipelines (docs/protocol.md, "Pipelining"). None:
    # every call is made when the compare loop reaches it.
    ahead: Ahead | None = None
    # Told the trace a search will compare next and the ``every`` of that
    # compare (or None: not known), so a target that sends calls ahead may
    # send that trace's while the current one is judged; the compare of that
    # trace then takes their answers.
    upcoming: Callable[..., None] | None = None
    # How the compare makes an op's call on a store: ``(store, op) -> value``.
    # None: ``engine.table.invoke``. The guided phase passes that call wrapped
    # so that only the target's own work is traced (``generators.guided``).
    invoke: Callable[[Any, Any], Any] | None = None


UPSTREAM_ENV = "AUXSTORE_UPSTREAM"
_UPSTREAM_RELATIVE = Path("..") / "shared" / "upstream" / "vllm_store.py"


def upstream_path() -> Path | None:
    """Where vLLM's module is, or None when it cannot be found.

    ``AUXSTORE_UPSTREAM``, when set, wins; if it names no file the result is
    None with a warning naming the path, so a mistyped path is visible in the
    test summary while the tests that need the module still skip cleanly.
    Otherwise the file beside the source checkout
    (``<repo root>/../shared/upstream``), then, for an installed package whose
    source tree is elsewhere, the same path relative to the working directory.
    """
    configured = os.environ.get(UPSTREAM_ENV)
    if configured:
        path = Path(configured)
        if path.is_file():
            return path.resolve()
        warnings.warn(f"{UPSTREAM_ENV}={configured!r} names no file; vLLM's module is unavailable", stacklevel=2)
        return None
    repo_root = Path(__file__).resolve().parents[3]  # spec/auxspec/engine/target.py
    for candidate in (repo_root / _UPSTREAM_RELATIVE, Path.cwd() / _UPSTREAM_RELATIVE):
        if candidate.is_file():
            return candidate.resolve()
    return None


def load_module_from_path(path: Path | str, name: str | None = None) -> ModuleType:
    """Import the Python file at ``path`` as a module and return it.

    The module is registered in ``sys.modules`` before it runs, because
    dataclasses look their module up there while being created. Loading the
    same file again returns the module already loaded, so its classes stay the
    same objects (an ``except`` on them keeps working).

    raises: FileNotFoundError, ImportError
    """
    resolved = Path(path).resolve()
    if not resolved.is_file():
        raise FileNotFoundError(f"no Python file to load at {resolved}")
    if name is None:
        # Unique per file, so two different files with one stem never collide.
        digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
        name = f"_auxspec_target_{resolved.stem}_{digest}"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(resolved):
        return loaded
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise ImportError(f"{resolved} cannot be loaded as a Python module", path=str(resolved))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as error:
        del sys.modules[name]  # a half-run module must not be found next time
        raise ImportError(f"running {resolved} failed: {error!r}", path=str(resolved)) from error
    return module


def load_upstream() -> ModuleType | None:
    """vLLM's store module, or None when it is not available (see :func:`upstream_path`).

    raises: ImportError (the file exists but does not run)
    """
    path = upstream_path()
    if path is None:
        return None
    return load_module_from_path(path)


def observe_vllm(store: Any) -> StoreSnapshot:
    """The snapshot of a vLLM ``BlockObjectStore``, taken without touching it.

    vLLM has no read-only view: ``get_concatenated`` is the only way to read a
    payload and it moves the keys it reads, which would change the very order
    being compared. So this reads the store's private attributes, which is
    tied to the module's current layout (checked by the agreement tests):
    ``_lru`` (key -> slot, least recent first), ``_arena`` (the mmap holding
    slot ``i`` at ``i * object_nbytes``; None once closed) and ``_references``
    (key -> count). A key left without a slot (vLLM's corruption on a bad
    payload) is reported with ``b""``, which is what a read of it returns.
    """
    arena = store._arena
    if arena is None:
        # vLLM keeps its dicts after close, but nothing in them can be reached.
        return StoreSnapshot(entries=(), references=(), closed=True)
    size: int = store.object_nbytes
    entries = tuple(
        (key, arena[slot * size : (slot + 1) * size] if slot >= 0 else b"") for key, slot in store._lru.items()
    )
    return StoreSnapshot(entries=entries, references=tuple(sorted(store._references.items())), closed=False)


def load_target(spec: str | None) -> Target:
    """``None``: the bundled auxstore; ``path/to/file.py``; ``module:Class``;
    or a module exposing ``BlockObjectStore`` (and, optionally,
    ``BackgroundBlockObjectStore``)."""
    name, _, attr = (spec or BUNDLED).partition(":")
    module: ModuleType
    if name.endswith(".py"):
        module = load_module_from_path(Path(name))
    else:
        try:
            module = _import_from_here(name)
        except ImportError as error:
            raise LookupError(f"cannot import {name!r}: {error}") from None
    if attr:
        cls = getattr(module, attr, None)
        if not callable(cls):
            raise LookupError(f"{name!r} has no class {attr!r}")
    else:
        cls = getattr(module, "BlockObjectStore", None)
        if cls is None:
            raise LookupError(f"{spec} has no BlockObjectStore; name the class as module:Class")
    background = None if attr else getattr(module, "BackgroundBlockObjectStore", None)
    return Target(f"{name}:{cls.__name__}", _factory(cls), _observer(cls), features_of(cls), background)


_OBSERVATIONS = ("flush", "__len__", "__contains__", "__enter__", "__exit__")


def _import_from_here(name: str) -> ModuleType:
    """Import ``name`` as ``python -m`` would find it: the working directory
    comes after the installed packages, so ``auxspec verify mypkg.store:MyStore``
    finds the reader's own package (a console script does not put the working
    directory on ``sys.path``) without shadowing an installed one."""
    here = os.getcwd()
    if here in sys.path or "" in sys.path:
        return importlib.import_module(name)
    sys.path.append(here)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(here)


def features_of(cls: Any) -> Features:
    """The ops a Python store class can be driven with: every form and shape
    of the Python API, ``read_into`` and ``stats`` if it has them, the
    observations if it has them all."""
    found = {PYTHON}
    if hasattr(cls, "read_into"):
        found.add(READ_INTO)
    if hasattr(cls, "stats"):
        found.add(STATS)
    if all(hasattr(cls, name) for name in _OBSERVATIONS):
        found.add(OBSERVE)
    return frozenset(found)


def _factory(cls: Any) -> Callable[[Any, Any], Any]:
    def build(max_bytes: int, object_nbytes: int) -> Any:
        return cls(max_bytes=max_bytes, object_nbytes=object_nbytes)

    return build


def _observer(cls: Any) -> Observe | None:
    if hasattr(cls, "snapshot"):
        return lambda store: store.snapshot()
    if hasattr(cls, "_evict_to_fit"):  # vLLM's module: read its private fields
        return observe_vllm
    return None


def errors_of(errors: Any) -> Errors:
    """``{exception class: kind}`` (a kind by its value, e.g. ``"capacity"``) as ``Target.errors``.

    raises: TypeError (a key that is not an exception class), ValueError (a value that is no kind)
    """
    mapped = []
    for cls, kind in dict(errors).items():
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise TypeError(f"errors map exception classes to kinds; {cls!r} is not an exception class")
        try:
            mapped.append((cls, Kind(kind)))
        except ValueError:
            kinds = ", ".join(k.value for k in Kind)
            raise ValueError(f"{kind!r} is not an error kind (one of {kinds})") from None
    return tuple(mapped)


def load_attribute(spec: str) -> Any:
    """``module:Name`` or ``path/to/file.py:Name``: that attribute.

    raises: LookupError
    """
    name, _, attr = spec.partition(":")
    if not attr:
        raise LookupError(f"{spec!r}: name it as module:Name")
    try:
        module = load_module_from_path(Path(name)) if name.endswith(".py") else importlib.import_module(name)
    except (ImportError, FileNotFoundError) as error:
        raise LookupError(f"cannot import {name!r}: {error}") from None
    if not hasattr(module, attr):
        raise LookupError(f"{name!r} has no {attr!r}")
    return getattr(module, attr)
