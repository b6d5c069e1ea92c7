"""What the atheris harnesses run, kept here so that they stay a few lines and
a port author can fuzz their own store without editing them.

Each harness entry takes the fuzzer's bytes, decodes them with ``engine.codec.decode``
(the one decoder) and raises ``DivergenceFound`` with the step view when the
target and the spec disagree.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import io
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any

from auxspec.checks import corruptions
from auxspec.checks.contracts import ContractViolation, checked_throughout
from auxspec.drivers import gated
from auxspec.drivers.protocol import serve
from auxspec.drivers.verify import exec_target
from auxspec.engine import traces
from auxspec.engine.codec import BAD_SIZES, SPECIAL_SIZES, decode, encode
from auxspec.engine.compare import CHECK_EVERY, Divergence, DivergenceFound, apply, compare, construct
from auxspec.engine.expect import initial_state
from auxspec.engine.ops import (
    ALL,
    UNDEFINED,
    Bad,
    Close,
    Contains,
    Enter,
    Exit,
    Flush,
    Get,
    Len,
    Op,
    Put,
    ReadInto,
    Stats,
    Trace,
)
from auxspec.engine.table import kind_of, step
from auxspec.engine.target import Target, load_target
from auxspec.engine.traces import TraceError
from auxspec.generators.background import BACKGROUND_CONSTRUCTORS, background_scenario
from auxspec.models import sequential as model
from auxspec.models.sequential import Err, Ok, Outcome
from auxspec.reference.store import ReferenceStore

TARGET_ENV = "AUXSPEC_TARGET"  # module:Class or a .py path; unset: the bundled store
PROFILE_ENV = "AUXSPEC_PROFILE"


def target_from_env(default: str | None = None) -> Target:
    return load_target(os.environ.get(TARGET_ENV, default))


def target_args_from_env() -> str:
    """What ``auxspec reproduce`` needs to name the harness's target, so that
    its printed command runs as printed from any directory: a port file by
    its absolute path, a module by its name (``reproduce_prefix`` makes it
    importable)."""
    named = os.environ.get(TARGET_ENV)
    if not named:
        return ""  # the bundled store: reproduce's default
    if named.endswith(".py") and Path(named).is_file():
        named = str(Path(named).resolve())
    return f"--target {shlex.quote(named)}"


def reproduce_prefix() -> str:
    """The environment a printed command needs, stated in it: a module
    target is found through this directory (``load_target`` looks there)
    and any ``PYTHONPATH`` the harness ran with."""
    named = os.environ.get(TARGET_ENV, "")
    paths = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    if named and not named.endswith(".py"):
        paths.insert(0, os.getcwd())
    paths = [os.path.abspath(entry) for entry in paths]
    return f"PYTHONPATH={shlex.quote(os.pathsep.join(dict.fromkeys(paths)))} " if paths else ""


# ------------------------------------------------------------------ findings

FINDINGS_ENV = "AUXSPEC_FINDINGS"  # a folder: one artifact per signature, its hits counted
SIGNATURES = "signatures"  # under it: <hash>.json (the first finding), <hash>.hits (one byte a hit)


class Finding(DivergenceFound):
    """A harness's finding, with its signature (see ``signature``)."""

    def __init__(self, message: str, signature: str) -> None:
        super().__init__(message)
        self.signature = signature


def _outcome_kind(outcome: Outcome | None, shown: str) -> str:
    if isinstance(outcome, Err):
        return f"error {outcome.kind.value}"
    if isinstance(outcome, Ok):
        return "ok"
    first = shown.split(":", 1)[0]  # "unexpected ValueError: ...", "the port broke: ..."
    return first.removeprefix("unexpected ").strip() or "nothing"


def signature(divergence: Divergence) -> str:
    """What tells one bug from another, not one input from another: the kind
    of the first diverging op, the spec's and the target's outcome kinds,
    what differed (the outcome, the state, the target's invariants, the
    sizes, ``repr``) and the documented deviation it is, if any."""
    op = divergence.op
    where = "new" if op is None else kind_of(op).name
    want = _outcome_kind(divergence.want, divergence.expected)
    got = _outcome_kind(divergence.got, divergence.actual)
    if divergence.expected == "the target's invariants hold":
        what = "invariants"
    elif divergence.got is not None and divergence.got == divergence.want:
        what = "state"
    elif divergence.got is not None and type(divergence.got) is type(divergence.want) and want == got:
        what = "value"
    elif divergence.expected.startswith(("repr", "the store's sizes")):
        what = divergence.expected.split()[0].strip("()")
    else:
        what = "outcome"
    return f"{where}: expected {want}, got {got} ({what}; deviation {divergence.deviation or 'none'})"


_NUMBERS = re.compile(r"0x[0-9a-f]+|\d+")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def generic_signature(error: BaseException) -> str:
    """A signature for the other harnesses' findings: the exception's type
    and its message's first line, numbers and quoted values left out."""
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {_NUMBERS.sub('N', _QUOTED.sub('Q', first))[:160]}"


def _artifact_prefix(argv: list[str]) -> str:
    for arg in argv:
        if arg.startswith("-artifact_prefix="):
            return arg.split("=", 1)[1]
    return ""


def deduplicated(body: Callable[[bytes], None], reproduce: str | None = None) -> Callable[[bytes], None]:
    """``body`` reporting each signature once: with ``AUXSPEC_FINDINGS`` set
    (``fuzz/run`` sets it to a scratch folder its workers share), the first input
    of a signature raises (libFuzzer writes it as ``crash-<sha1>``) and is
    recorded in ``signatures/<hash>.json``; later ones only add a hit to
    ``signatures/<hash>.hits`` and return, so the fuzzer goes on looking for
    other bugs. ``reproduce``: the command that replays a finding, with
    ``{file}`` for the file (default: this harness on the file)."""
    folder = os.environ.get(FINDINGS_ENV)
    prefix = _artifact_prefix(sys.argv)
    template = reproduce or f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(sys.argv[0]).resolve()))} {{file}}"

    def one_input(data: bytes) -> None:
        try:
            body(data)
        except AssertionError as error:
            found = getattr(error, "signature", None) or generic_signature(error)
            artifact = f"{prefix}crash-{hashlib.sha1(data).hexdigest()}"
            line = template.replace("{file}", shlex.quote(os.path.abspath(artifact)))  # runs from any directory
            if folder is not None and not _first_hit(Path(folder), found, artifact, line, data):
                return
            if not isinstance(error, Finding):
                raise
            raise Finding(f"{error}\nsignature: {found}\nreproduce: {line}", found) from None

    return one_input


def _first_hit(folder: Path, found: str, artifact: str, line: str, data: bytes) -> bool:
    """Count a hit of ``found``; True for the first one (of any process)."""
    where = folder / SIGNATURES
    where.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha1(found.encode()).hexdigest()[:16]
    with open(where / f"{name}.hits", "ab") as hits:  # O_APPEND: one byte a hit, from any worker
        hits.write(b".")
    try:
        fd = os.open(where / f"{name}.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    record = {"signature": found, "artifact": artifact, "reproduce": line, "bytes": len(data)}
    with os.fdopen(fd, "w") as out:
        json.dump(record, out)
    return True


def auxspec_command() -> str:
    """How to run ``auxspec`` with this interpreter: its script beside it, or ``-m``."""
    script = Path(sys.executable).with_name("auxspec")
    if script.is_file():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m auxspec.cli"


def instrument(*modules: ModuleType) -> int:
    """Atheris's coverage (and comparison) instrumentation on the code written
    in ``modules`` and nothing else, after they are imported; how many
    functions were instrumented. A harness's feedback should come from its
    code under test: ``atheris.instrument_imports`` takes whole top-level
    packages (all of ``auxspec``, the decoder and the engine included, which
    run the same way on every input and cost instrumented time on each).
    Each function's code is replaced in place, so every reference to it
    (a table row, another module's import) runs the instrumented code."""
    import atheris  # type: ignore[import-untyped]  # the fuzz extra's, only a harness calls this

    seen: set[int] = set()
    count = 0
    for module in modules:
        for function in _written_in(module, vars(module), seen):
            atheris.instrument_func(function)
            count += 1
    return count


def _written_in(module: ModuleType, namespace: Mapping[str, Any], seen: set[int]) -> Iterator[FunctionType]:
    """The functions of ``namespace`` (a module's, or a class's of it) whose
    code is in ``module``'s file: methods, properties, static and class
    methods and decorated functions (unwrapped) included, each once."""
    for value in list(namespace.values()):
        if isinstance(value, type):
            if value.__module__ == module.__name__ and id(value) not in seen:
                seen.add(id(value))
                yield from _written_in(module, vars(value), seen)
            continue
        parts = (value.fget, value.fset, value.fdel) if isinstance(value, property) else (value,)
        for part in parts:
            if isinstance(part, (staticmethod, classmethod)):
                part = part.__func__
            with contextlib.suppress(ValueError):  # a wrapper chain that loops
                part = inspect.unwrap(part) if callable(part) else part
            if isinstance(part, FunctionType) and part.__code__.co_filename == module.__file__ and id(part) not in seen:
                seen.add(id(part))
                yield part


def libfuzzer_argv(argv: list[str]) -> list[str]:
    """``argv`` for ``atheris.Setup`` with argv[0] replaced by this
    interpreter and the harness: libFuzzer re-runs argv[0] through the shell
    in fork, merge and ``-minimize_crash`` modes, and the harness's
    ``#!/usr/bin/env python3`` would find whichever python comes first on
    PATH, not the one with atheris. A frozen harness (OSS-Fuzz's pyinstaller
    build) is its own interpreter: its argv is kept."""
    if not argv or getattr(sys, "frozen", False):
        return argv
    return [f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(argv[0]).resolve()))}", *argv[1:]]


def differential(
    target: Target, profile: str, every: int = CHECK_EVERY, reproduce: str = ""
) -> Callable[[bytes], None]:
    """The harness body: spec vs ``target`` under ``profile``, in the
    engine's cheap mode (``every`` > 1: outcomes after every op, the whole
    state and the invariants every ``every`` ops and at the end, the precise
    replay on any difference; see ``engine.compare.compare``), each
    signature reported once (``deduplicated``). ``reproduce``: how
    ``auxspec reproduce`` names the target (``--target X``, ``--exec CMD``)."""

    features = target.features

    def compared(data: bytes) -> None:
        divergence = compare(decode(data, profile, features), target, every=every)
        if divergence is not None:
            raise Finding(f"{target.label} ({profile}):\n{divergence.render()}", signature(divergence))

    how = f"{reproduce} --profile {profile}".strip()
    return deduplicated(compared, f"{reproduce_prefix()}{auxspec_command()} reproduce {{file}} {how}")


def exec_differential(
    command: str, profile: str, every: int = CHECK_EVERY, op_timeout: float = 5.0
) -> Callable[[bytes], None]:
    """The harness body for a port process (``docs/protocol.md``): one
    process for the whole run, a new store per input through ``new`` (a new
    process only after one broke), judged like a Python target."""
    target, _ = exec_target(command, op_timeout)  # the port exits when the harness does (its stdin closes)
    return differential(target, profile, every, reproduce=f"--exec {shlex.quote(command)}")


def trace_parser(data: bytes) -> None:
    """The trace reader and the port protocol's request reader (``auxspec
    serve``, over the spec's store) on arbitrary text: only ``TraceError``
    may come out of the first, only status 0 or 3 out of the second."""
    text = data.decode("utf-8", errors="replace")
    with contextlib.suppress(TraceError):
        traces.loads(text, "<fuzz>")
    status = serve(lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n), io.StringIO(text), _SINK, _SINK)
    if status not in (0, 3):
        raise AssertionError(f"auxspec serve ended with status {status}")


class _Sink(io.StringIO):
    """Where the protocol harness's answers and complaints go: nowhere."""

    def write(self, text: str) -> int:
        return len(text)


_SINK = _Sink()


def profile_from_env(default: str) -> str:
    return os.environ.get(PROFILE_ENV, default)


def background_harness(profile: str = "strict") -> Callable[[bytes], None]:
    """The background harness body: auxstore's background store (vLLM's under
    ``upstream``) driven through ``background_scenario(data)`` with the writer
    held at a gate; a ``Violation`` (an AssertionError) is the finding."""
    target = gated.auxstore_target() if profile == "strict" else gated.upstream_target()
    if target is None:
        raise LookupError("vLLM's module is not available for the upstream background harness")
    chosen = target

    def one_input(data: bytes) -> None:
        gated.run_scenario(chosen, background_scenario(data, profile))

    return one_input


# ------------------------------------------------------------------ model harness


class ModelContractBroken(AssertionError):
    """A model step broke its own contract on the fuzzer's input."""


def model_contracts(data: bytes) -> None:
    """The model harness body: the model's PEP 316 contracts, checked on every
    step of ``decode(data[1:])`` (CrossHair's job, by fuzzing, on traces of
    any length). ``data[0]`` picks the profile; invalid values come under
    both, and under ``upstream`` the step must raise ``UndefinedInput``,
    which ends the trace."""
    profile = "upstream" if data and data[0] & 1 else "strict"
    trace = decode(data[1:], profile, ALL | {UNDEFINED})
    try:
        with checked_throughout(model):  # the steps and the helpers they call
            state = initial_state(trace, model)
            if isinstance(state, model.Err):
                return
            for op in trace.ops:
                state = step(state, op, model)[0]
    except model.UndefinedInput:
        if profile != "upstream":
            raise ModelContractBroken(f"strict raised UndefinedInput on {trace}") from None
    except ContractViolation as broken:
        raise ModelContractBroken(f"{broken}\nin {trace}") from broken


# ------------------------------------------------------------- invariants harness


_BUNDLED: list[Target] = []  # loaded on first use, so that a harness can instrument auxstore first


class ToothlessCheck(AssertionError):
    """An invariant check passed a state the fuzzer had broken."""


def invariant_teeth(data: bytes) -> None:
    """The invariants harness body: run ``decode(data[1:])`` on auxstore's
    store and the model, break each (corruption ``data[0]``), and require
    ``check_invariants()`` and ``model.violations`` to notice."""
    which = data[0] if data else 0
    trace = decode(data[1:], "strict")
    if not _BUNDLED:
        _BUNDLED.append(load_target(None))
    store, _ = construct(_BUNDLED[0].factory, trace)
    if store is None:
        return
    state = initial_state(trace)
    assert isinstance(state, model.State)
    for op in trace.ops:
        apply(store, op)  # the store harness compares the outcomes; here only the state matters
        state = step(state, op)[0]
    store.check_invariants()  # intact before it is broken
    broken = corruptions.corrupt_store(store, which)
    try:
        store.check_invariants()
    except AssertionError:  # auxstore.InvariantError is one
        pass
    else:
        raise ToothlessCheck(f"check_invariants() passed a store with {broken}, after {trace}")
    name, corrupt, words = corruptions.MODEL[which % len(corruptions.MODEL)]
    found = model.violations(corrupt(state))
    if not any(words in problem for problem in found):
        raise ToothlessCheck(f"violations() found {found} in a state with {name} (wanted {words!r}), after {trace}")


# ------------------------------------------------------------------ dictionaries


def _op_bytes(op: Op, profile: str = "strict") -> bytes:
    """What ``decode`` reads as ``op`` (keys named k0.. in order of use)."""
    data = encode(Trace(profile, 4, 2, (op,)))
    assert data is not None, op
    return data[3:]  # after the sizes


def dictionary(harness: str) -> list[tuple[str, bytes]]:
    """libFuzzer dictionary entries for ``harness``: byte strings ``decode``
    reads as whole ops, store sizes and (per harness) the leading byte, made
    with ``encode`` so they cannot drift from the decoder."""
    upstream = harness == "upstream"
    profile = "upstream" if upstream else "strict"
    k0, k1 = "k0", "k1"
    ops: list[tuple[str, Op]] = [
        ("put_k0", Put(((k0, b"AA"),))),
        ("put_k0_k0_dedup", Put(((k0, b"AA"), (k0, b"BB")))),
        ("put_k0_retain_k0", Put(((k0, b"AA"),), (k0,))),
        ("retain_k0", Put((), (k0,))),
        ("release_k0", Put((), (), (k0,))),
        ("retain_release_k0", Put((), (k0,), (k0,))),
        ("release_k0_twice", Put((), (), (k0, k0))),
        ("put_k0_k1_retain_k1", Put(((k0, b"AA"), (k1, b"BB")), (k1,))),
        ("get_k0", Get((k0,))),
        ("get_k0_k0", Get((k0, k0))),
        ("get_none", Get(())),
        ("put_tuple_form", Put(((k0, b"AA"),), form="tuple")),
        ("get_tuple_form", Get((k0,), form="tuple")),
    ]
    if not upstream:
        ops += [
            ("close", Close()),
            ("put_iter_form", Put(((k0, b"AA"),), (k0,), form="iter")),
            ("get_iter_form", Get((k0,), form="iter")),
            ("read_into_k0", ReadInto((k0,), 2)),
            ("read_into_k0_short", ReadInto((k0,), 1)),
            ("read_into_read_only", ReadInto((k0,), 2, readonly=True)),
            ("read_into_strided", ReadInto((k0,), Bad("strided"))),
            ("read_into_not_a_buffer", ReadInto((k0,), Bad("not-buffer"))),
            ("flush", Flush()),
            ("len", Len()),
            ("contains_k0", Contains(k0)),
            ("stats", Stats()),
            ("enter", Enter()),
            ("exit", Exit()),
            ("put_key_not_str", Put(((1, b"AA"),))),
            ("put_payload_wrong_length", Put(((k0, b"AAA"),))),
            ("put_payload_not_bytes", Put(((k0, None),))),
            ("put_object_without_key", Put((Bad("object"),))),
            ("put_batch_is_a_str", Put(Bad("str"))),
            ("retain_is_an_int", Put((), Bad("int"))),
            ("get_keys_is_a_str", Get(Bad("str"))),
        ]
    entries = [(name, _op_bytes(op, profile)) for name, op in ops]
    sizes = [
        ("sizes_capacity1_nbytes1", bytes([0, 0, 0])),
        ("sizes_capacity4_nbytes2", bytes([1, 6, 1])),
        ("sizes_big_objects", bytes([SPECIAL_SIZES, 2, 0])),
        ("sizes_out_of_range", bytes([SPECIAL_SIZES + 8])),
    ]
    if not upstream:
        sizes.append(("sizes_not_ints", bytes([SPECIAL_SIZES + 8 + len(BAD_SIZES)])))
    entries += sizes
    if harness == "background":
        entries += [
            ("config_bound1", b"\x00"),
            ("config_bound1_memory_error_at_call0", b"\x03"),
            ("config_bound_zero", bytes([BACKGROUND_CONSTRUCTORS])),
            ("config_inner_none", b"\xff"),
            ("schedule_release1", b"\x01"),
            ("schedule_release3", b"\x03"),
        ]
    elif harness == "model":
        entries += [("profile_strict", b"\x00"), ("profile_upstream", b"\x01")]
    elif harness == "invariants":
        entries += [(f"corruption_{i}", bytes([i])) for i in range(10)]
    return entries


def _escaped(data: bytes) -> str:
    return "".join(f"\\x{byte:02x}" for byte in data)


def dictionary_text(harness: str) -> str:
    """``dictionary(harness)`` in libFuzzer's dictionary format."""
    rows = [
        "# libFuzzer dictionary, written by fuzz/corpus/make_seeds.py --dictionaries from",
        f"# auxspec.drivers.fuzzing.dictionary({harness!r}): what the op alphabet's decoder reads",
        "# as whole ops, sizes and leading bytes. Do not edit; regenerate.",
    ]
    rows += [f'{name}="{_escaped(data)}"' for name, data in dictionary(harness)]
    return "\n".join(rows) + "\n"
