"""``auxspec play``: type ops against the spec and see the store after each.

A session is a store's parameters plus the ops typed so far; every view is
recomputed from that trace with ``timeline``, so ``undo`` is dropping the
last op, ``profile`` is replaying the same ops under the other profile, and
``save`` writes the trace as a vector file that ``auxspec verify --vectors``
replays.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from auxspec.engine import traces
from auxspec.engine.ops import REENTRANT_FORMS, Close, Contains, Flush, Get, Len, Op, Put, ReadInto, Stats, Trace
from auxspec.models.sequential import PROFILES
from auxspec.teach.timeline import Step, Timeline, call_text, timeline

HELP = """\
ops (keys are words; a put's payload is the key repeated, or give key=HEX):
  put a b [--retain a ...] [--release b ...]   put a batch, with pins
  retain a [b ...]  /  release a [b ...]       only pins (a put with no objects)
  get a [b ...]                                get_concatenated
  read a [b ...] [--buffer N]                  read_into a buffer of N bytes (default: just enough)
  put/get/read ... --from-inside CALL          the batch or key list is a generator that first calls
                                               CALL (put, get or close) on the same store (section 12)
  in a  /  len  /  stats  /  flush             look without touching
  close
session:
  undo            take back the last op
  show            the whole session, step by step
  trace           the ops typed so far
  save FILE       write the session as a trace file (auxspec verify --vectors FILE replays it)
  profile NAME    replay the session under strict or upstream
  store MAX OBJ   start again with max_bytes=MAX, object_nbytes=OBJ
  help, quit"""


class Refused(ValueError):
    """A line the session cannot act on; nothing changes."""


@dataclass
class Session:
    max_bytes: int = 6
    object_nbytes: int = 2
    profile: str = "strict"
    ops: list[Op] = field(default_factory=list)

    @property
    def trace(self) -> Trace:
        return Trace(self.profile, self.max_bytes, self.object_nbytes, tuple(self.ops))

    def timeline(self) -> Timeline:
        return timeline(self.trace, "auxspec play")

    def add(self, op: Op) -> Step:
        """Run ``op`` after the others; refused when the profile leaves it undefined."""
        line = timeline(Trace(self.profile, self.max_bytes, self.object_nbytes, (*self.ops, op)))
        if line.capacity is None:
            raise Refused(f"this store cannot be built: {line.header}")
        step = line.steps[-1]
        if step.outcome is None:
            raise Refused(f"the {self.profile} profile leaves this input undefined ({step.notes[0]}); not applied")
        self.ops.append(op)
        return step

    def payload(self, key: str) -> bytes:
        seed = key.encode() or b"\0"
        return (seed * self.object_nbytes)[: self.object_nbytes]


def _split(words: list[str], flags: tuple[str, ...]) -> tuple[list[str], dict[str, list[str]]]:
    """Positional words and each flag's words (``--retain a b --release c``)."""
    positional: list[str] = []
    given: dict[str, list[str]] = {flag: [] for flag in flags}
    current: list[str] = positional
    for word in words:
        if word.startswith("--"):
            if word not in given:
                raise Refused(f"unknown option {word}; this command takes {', '.join(flags) or 'no options'}")
            current = given[word]
        else:
            current.append(word)
    return positional, given


def _object(session: Session, word: str) -> tuple[str, bytes]:
    key, sep, data = word.partition("=")
    if not sep:
        return key, session.payload(key)
    try:
        return key, bytes.fromhex(data)
    except ValueError:
        raise Refused(f"{data!r} is not hex (in {word!r})") from None


INSIDE = "--from-inside"
INNER_CALLS = tuple(form.removeprefix("reenter-") for form in REENTRANT_FORMS)


def _form(options: dict[str, list[str]]) -> str:
    """The op's form: ``list``, or the reentrant form ``--from-inside CALL`` names."""
    given = options.get(INSIDE, [])
    if not given:
        return "list"
    if len(given) != 1 or given[0] not in INNER_CALLS:
        raise Refused(f"{INSIDE} takes one of {', '.join(INNER_CALLS)}: the call the caller code makes")
    return f"reenter-{given[0]}"


def parse_op(session: Session, words: list[str]) -> Op:
    """The op a command line stands for."""
    name, rest = words[0], words[1:]
    if name == "put":
        keys, pins = _split(rest, ("--retain", "--release", INSIDE))
        objects = tuple(_object(session, word) for word in keys)
        return Put(objects, tuple(pins["--retain"]), tuple(pins["--release"]), form=_form(pins))
    if name in ("retain", "release"):
        keys, _ = _split(rest, ())
        if not keys:
            raise Refused(f"{name} needs at least one key")
        return Put((), tuple(keys)) if name == "retain" else Put((), (), tuple(keys))
    if name == "get":
        keys, options = _split(rest, (INSIDE,))
        return Get(tuple(keys), form=_form(options))
    if name == "read":
        keys, options = _split(rest, ("--buffer", INSIDE))
        size = len(keys) * session.object_nbytes
        if options["--buffer"]:
            try:
                size = int(options["--buffer"][0])
            except ValueError:
                raise Refused("--buffer takes a number of bytes") from None
            if size < 0:
                raise Refused("--buffer takes a number of bytes")
        return ReadInto(tuple(keys), size, form=_form(options))
    if name == "in":
        if len(rest) != 1:
            raise Refused("in takes one key")
        return Contains(rest[0])
    simple: dict[str, Callable[[], Op]] = {"len": Len, "stats": Stats, "flush": Flush, "close": Close}
    if name in simple:
        if rest:
            raise Refused(f"{name} takes no arguments")
        return simple[name]()
    raise Refused(f"unknown command {name!r} (type help)")


Show = Callable[[Step, int], None]


def execute(session: Session, line: str, show: Show, say: Callable[[str], None]) -> bool:
    """Act on one input line; False when the session should end."""
    try:
        words = shlex.split(line)
    except ValueError as error:
        say(f"cannot read that line: {error}")
        return True
    if not words:
        return True
    name = words[0]
    try:
        if name in ("quit", "exit"):
            return False
        if name == "help":
            say(HELP)
        elif name == "undo":
            if not session.ops:
                raise Refused("nothing to undo")
            undone = session.ops.pop()
            say(f"undid {call_text(undone)}")
            _show_state(session, show, say)
        elif name == "show":
            from auxspec.teach import terminal  # rich: not on the docs playground's import path

            say(terminal.plain(session.timeline()).rstrip())
        elif name == "trace":
            say("\n".join(f"{i}. {call_text(op)}" for i, op in enumerate(session.ops, 1)) or "(no ops yet)")
        elif name == "save":
            _save(session, words[1:], say)
        elif name == "profile":
            _profile(session, words[1:], show, say)
        elif name == "store":
            _store(session, words[1:], say)
        else:
            step = session.add(parse_op(session, words))
            show(step, len(session.ops))
    except Refused as why:
        say(f"refused: {why}")
    return True


def _show_state(session: Session, show: Show, say: Callable[[str], None]) -> None:
    line = session.timeline()
    if line.steps:
        show(line.steps[-1], len(line.steps))
    else:
        say(f"{line.header}; empty")


def _save(session: Session, args: list[str], say: Callable[[str], None]) -> None:
    if len(args) != 1:
        raise Refused("save takes a file name")
    path = Path(args[0])
    vector = traces.vector_from_trace(session.trace, path.stem, "saved from auxspec play")
    try:
        traces.write(vector, path)
    except OSError as error:
        raise Refused(f"cannot write {path}: {error}") from None
    say(f"saved {len(session.ops)} ops to {path}")


def _profile(session: Session, args: list[str], show: Show, say: Callable[[str], None]) -> None:
    if len(args) != 1 or args[0] not in PROFILES:
        raise Refused(f"profile takes one of {', '.join(PROFILES)}")
    replayed = timeline(Trace(args[0], session.max_bytes, session.object_nbytes, tuple(session.ops)))
    if len(replayed.steps) < len(session.ops) or any(step.outcome is None for step in replayed.steps):
        raise Refused(f"{args[0]} leaves an op of this session undefined")
    session.profile = args[0]
    say(f"profile {session.profile}: the {len(session.ops)} ops replayed")
    _show_state(session, show, say)


def _store(session: Session, args: list[str], say: Callable[[str], None]) -> None:
    try:
        max_bytes, object_nbytes = (int(a) for a in args)
    except ValueError:
        raise Refused("store takes two numbers: MAX_BYTES OBJECT_NBYTES") from None
    fresh = timeline(Trace(session.profile, max_bytes, object_nbytes))
    if fresh.capacity is None:
        raise Refused(f"this store cannot be built: {fresh.header}")
    session.max_bytes, session.object_nbytes, session.ops = max_bytes, object_nbytes, []
    say(f"{fresh.header}; empty")


def run(session: Session, lines: IO[str], out: IO[str], colour: bool, interactive: bool = False) -> int:
    """The prompt loop: read ``lines`` until quit or end of input. Interactive:
    read with ``input()`` (line editing and history) and prompt."""

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    from auxspec.teach import terminal  # rich: not on the docs playground's import path

    def show(step: Step, total: int) -> None:
        terminal.show_step(step, total, out, colour)

    say(f"{session.timeline().header}; empty. Type help for the commands.")
    while True:
        if interactive:
            try:
                line = input("auxspec> ") + "\n"
            except EOFError:
                return 0
        else:
            line = lines.readline()
            if not line:
                return 0
            if line.strip():
                say(f"> {line.strip()}")  # so a log reads as a transcript
        if not execute(session, line, show, say):
            return 0


def main_play(args: argparse.Namespace) -> int:
    session = Session(args.max_bytes, args.object_nbytes, args.profile)
    built = timeline(session.trace)
    if built.capacity is None:
        print(f"auxspec: this store cannot be built: {built.header}", file=sys.stderr)
        return 2
    colour = {"always": True, "never": False}.get(args.color, sys.stdout.isatty())
    interactive = sys.stdin.isatty()
    if interactive:
        with contextlib.suppress(ImportError):  # not on every platform
            import readline  # noqa: F401 - line editing and history for input()
    return run(session, sys.stdin, sys.stdout, colour, interactive)
