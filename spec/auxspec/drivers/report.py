"""What ``auxspec verify`` prints about a counterexample, readable by default.

Every phase's counterexample goes through the same steps (shrunk, written,
shown): this module has the parts that are text. A line is at most
``WIDTH`` characters and a failing report at most ``LINES`` lines unless
``--verbose``; the headline names the first op whose outcome differs,
expected against got; the commands printed run as printed in a fresh
shell (the working directory and the environment the target needs are in
them).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from auxspec.engine.compare import Divergence, show
from auxspec.engine.ops import Op, numbered, runs
from auxspec.engine.table import describe
from auxspec.models.sequential import Ok

WIDTH = 160  # the longest line printed without --verbose
LINES = 40  # the longest failing report printed without --verbose
CALL_LEAST = 24  # the least of a call a headline shows (the rest of the line goes to both sides)
SHOWN_OPS = 12  # ops of a trace shown before its diverging one, without --verbose
# The environment a target may need to load: Python's module path, vLLM's module for the ports built on it,
# and the Redis server a remote store runs on (docs/remote.md).
ENVIRONMENT = ("PYTHONPATH", "AUXSTORE_UPSTREAM", "AUXSTORE_REDIS_URL")
INTERNAL_ERROR = 3  # verify's exit status when verify itself failed (0, 1, 2: auxspec.cli)


TAIL = 32  # characters a cut line keeps of its end (where a line often says what it is: "(protocol 2)")


def clip(line: str, width: int = WIDTH) -> str:
    """``line`` cut to ``width`` characters: its start and, on a wide line,
    its end, with the cut said in between."""
    if len(line) <= width:
        return line
    if width < 80:
        return line[: width - 3] + "..."
    mark = " [... --verbose shows all ...] "
    head = width - len(mark) - TAIL
    return line[:head] + mark + line[-TAIL:]


def middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters in its middle (a long path or
    command: its start and its end both say something)."""
    if len(text) <= width:
        return text
    keep = width - 5
    return text[: keep - keep // 3] + " ... " + text[len(text) - keep // 3 :]


def clip_lines(text: str, width: int = WIDTH) -> str:
    return "\n".join(clip(line, width) for line in text.split("\n"))


def fit(lines: list[str], most: int) -> list[str]:
    """At most ``most`` lines: the first few and the last ones (where a
    report ends, at the failure), the rest counted."""
    if len(lines) <= most:
        return lines
    head = 3
    tail = most - head - 1
    return [*lines[:head], f"  ... {len(lines) - head - tail} lines not shown (--verbose shows all)", *lines[-tail:]]


def headline(divergence: Divergence, phase: str) -> str:
    """One line: which phase found it, the first op whose outcome differs, expected against got."""
    found = f"DIVERGES (found by {phase})"
    if divergence.step < 0:
        return clip(f"{found}: building the store: expected {divergence.expected}, got {divergence.actual}")
    op = divergence.op
    assert op is not None
    if divergence.compared and divergence.want is not None and divergence.got is not None:
        want, got = divergence.want, divergence.got
        if isinstance(want, Ok) and isinstance(got, Ok) and isinstance(want.value, bytes) and want != got:
            sides = _bytes_sides(want.value, got.value)
        elif want != got:
            sides = f"expected {show(want, None)}, got {show(got, None)}"
        else:
            sides = state_difference(divergence)  # the outcome agrees: the state after it does not
    else:
        sides = f"expected {divergence.expected}, got {divergence.actual}"
    where = f"{found}: step {divergence.step + 1}, "
    room = max(CALL_LEAST, WIDTH - len(where) - len(sides) - 2)  # the call gives way, so both sides show
    return clip(f"{where}{clip(describe(op), room)}: {sides}")


def _bytes_sides(want: bytes, got: object) -> str:
    """Two values of a read: their lengths and the first offset where they differ."""
    if not isinstance(got, bytes):
        return f"expected {len(want)} bytes, got {clip(repr(got), SIDE)}"
    offset = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), min(len(want), len(got)))
    return f"expected {len(want)} bytes, got {len(got)}, first differing at offset {offset}"


SIDE = 30  # the most of one side of a state difference shown in a headline


def state_difference(divergence: Divergence) -> str:
    """The first part of the state after the op that differs, expected against got."""
    want, got = divergence.want_snapshot, divergence.got_snapshot
    if want is None or got is None:
        return "the state after it differs"
    want_keys, got_keys = [k for k, _ in want.entries], [k for k, _ in got.entries]
    if want_keys != got_keys:
        return f"stored keys expected {clip(repr(want_keys), SIDE)}, got {clip(repr(got_keys), SIDE)}"
    payloads = dict(got.entries)
    for key, data in want.entries:
        if payloads.get(key) != data:
            return f"the stored payload of {clip(repr(key), SIDE)} differs"
    want_pins, got_pins = dict(sorted(want.references)), dict(sorted(got.references))
    if want_pins != got_pins:
        apart = sorted(k for k in set(want_pins) | set(got_pins) if want_pins.get(k) != got_pins.get(k))
        key = apart[0]
        return f"pins of {clip(repr(key), SIDE)} expected {want_pins.get(key, 0)}, got {got_pins.get(key, 0)}"
    if want.closed != got.closed:
        return f"closed expected {want.closed}, got {got.closed}"
    return "the state after it differs (the recency order of its keys)"


def background_headline(violation: str, calls: int) -> str:
    """One line for a background violation: what the driver saw, at which owner call."""
    first = violation.split("\n", 1)[0]
    why = first.split(": ", 1)[1] if ": " in first else first
    return clip(f"DIVERGES (found by the background phase, {calls} owner calls): {why}")


def _program() -> list[str]:
    """How to run auxspec from a fresh shell: ``auxspec`` when that name on
    PATH is this program, else this program's path, else this interpreter."""
    running = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    found = shutil.which("auxspec")
    if running is not None and running.name == "auxspec" and running.is_file():
        if found is not None and Path(found).resolve() == running:
            return ["auxspec"]
        return [str(running)]
    if found is not None:
        return ["auxspec"]
    return [sys.executable, "-m", "auxspec.command"]


def command(words: list[str], limits: dict[str, str] | None = None) -> list[str]:
    """``auxspec WORDS`` as the shell words of a command line that runs as
    printed in a fresh shell: from this working directory, with the
    environment a target needs and ``limits`` (variables that raise a
    reader's limits for a file past them); each word already quoted."""
    env = [f"{name}={shlex.quote(os.environ[name])}" for name in ENVIRONMENT if os.environ.get(name)]
    env += [f"{name}={shlex.quote(value)}" for name, value in (limits or {}).items()]
    return ["cd", shlex.quote(os.getcwd()), "&&", *env, *map(shlex.quote, _program() + words)]


def wrapped(label: str, words: list[str], width: int = WIDTH) -> list[str]:
    """``label`` and a command's words, continued over lines with a backslash
    between words (never inside a quoted one, where a backslash would be
    taken as it is) when the command is too long for one line."""
    lines, line = [], label
    for word in words:
        if len(line) + 1 + len(word) > width - 2 and line.strip() and line != label:
            lines.append(line + " \\")
            line = "   "
        line = f"{line} {word}"
    lines.append(line)
    return lines


def target_words(target: str | None, exec_command: str | None) -> list[str]:
    """How reproduce and explain are told the target verify was given."""
    if exec_command:
        return ["--exec", exec_command]
    return ["--target", target] if target else []


def calls_by_ends(
    ops: tuple[Op, ...], show: Callable[[Op], str] = describe, first: int = 3, last: int = 6
) -> list[str]:
    """A long trace's calls as rows, by its ends (its ``first`` and ``last``
    entries): a call made many times in a row is one row, "× N", as its
    vector writes it once with ``times``; each row within ``WIDTH``."""
    found = runs(ops)
    rows: list[str] = []
    for at, (index, op, count) in enumerate(found):
        if first <= at < len(found) - last:
            if at == first:
                hidden = found[len(found) - last][0] - index
                rows.append(f"  ... {hidden:,} calls in {len(found) - first - last:,} entries ...")
            continue
        times = f" × {count:,}" if count > 1 else ""
        rows.append(clip(f"{numbered(index, count):>7}. {show(op)}{times}"))
    return rows
