"""A timeline in the terminal: one rich panel per step, in colour; plain
text (the same lines, no boxes, no escape codes) when the output is not a
terminal, so it reads the same in a log or a pipe."""

from __future__ import annotations

import shutil
import sys
from typing import IO

from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from auxspec.drivers.report import WIDTH, clip
from auxspec.engine.traces import printable
from auxspec.teach.timeline import (
    EVICTED,
    LIST_SHOWN,
    NEW,
    PROTECTED,
    READ,
    ROW_ENDS,
    TERMINAL,
    Field,
    Row,
    Slot,
    Step,
    Timeline,
    outcome_text,
    some,
)

Segment = tuple[str, str]  # text, rich style ("" for none)
Line = list[Segment]

LEGEND = "key*n: n pins   key!: protected batch key   +key: new   key^: released to zero (terminal)   x(key): evicted"
LABEL_WIDTH = 12


_STYLES = ((EVICTED, "bold red strike"), (TERMINAL, "yellow"), (PROTECTED, "green"), (READ, "cyan"))


def _slot(slot: Slot) -> Segment:
    text = ("+" if NEW in slot.tags else "") + slot.key
    text += (f"*{slot.pins}" if slot.pins else "") + ("!" if PROTECTED in slot.tags else "")
    text += "^" if TERMINAL in slot.tags else ""
    if EVICTED in slot.tags:
        text = f"x({text})"
    style = next((style for tag, style in _STYLES if tag in slot.tags), "")
    if slot.pins and EVICTED not in slot.tags:
        style = "bold blue"
    return text, style + (" bold" if NEW in slot.tags and "bold" not in style else "")


def row_line(row: Row) -> Line:
    line: Line = [(f"  {row.label:<{LABEL_WIDTH}}", "dim"), ("LRU  ", "dim")]
    if not row.slots:
        line.append(("(empty)  ", "dim"))
    for index, slot in enumerate(row.slots):
        if row.hidden and index == ROW_ENDS:
            line.append((f"… {row.hidden:,} more …  ", "dim"))
        text, style = _slot(slot)
        line.append((text, style))
        line.append(("  ", ""))
    line.append(("MRU", "dim"))
    if row.unstored:
        shown = " ".join(f"{key}*{count}" for key, count in row.unstored)
        more = f" … {row.unstored_hidden:,} more" if row.unstored_hidden else ""
        line.append((f"   pinned, not stored: {shown}{more}", "blue"))
    return line


def step_lines(step: Step, total: int) -> list[Line]:
    """Everything a step shows, as styled lines."""
    lines: list[Line] = [[(f"step {step.number}/{total}  ", "bold"), (step.call, "bold")]]
    lines.extend(row_line(row) for row in step.rows)
    if step.pins:
        lines.append([("  pins: ", "dim"), (some([f"{k}={n}" for k, n in step.pins]), "blue")])
    if step.protected:
        lines.append([("  protected: ", "dim"), (some(step.protected), "green")])
    if step.terminal:
        lines.append([("  terminal: ", "dim"), (some(step.terminal), "yellow")])
    for reason in step.evicted[:LIST_SHOWN]:
        lines.append([("  evicted: ", "dim"), (reason.key, "bold red"), (f": {reason.why}", "")])
    if len(step.evicted) > LIST_SHOWN:
        lines.append([(f"  … {len(step.evicted) - LIST_SHOWN:,} more evicted", "dim")])
    for note in step.notes:
        lines.append([("  · ", "dim"), (note, "")])
    style = "red" if step.outcome_text.startswith("error") or step.outcome is None else "green"
    lines.append([("  outcome: ", "dim"), (step.outcome_text, f"bold {style}")])
    if step.recorded is not None:
        lines.append([("  the file expects ", "bold red"), (outcome_text(step.recorded), "bold red"),
                      (": the file is stale (auxspec vectors --check)", "red")])  # fmt: skip
    lines.extend(field_lines(step.actual, step.first_difference))
    return lines


def field_lines(fields: tuple[Field, ...], first: str | None) -> list[Line]:
    if not fields:
        return []
    width = max(len(f.name) for f in fields)
    left = max(len(f.expected) for f in (*fields, Field("", "expected (spec)", "")))
    lines: list[Line] = [[(f"  {'':<{width}}  {'expected (spec)':<{left}}  actual (target)", "bold")]]
    for f in fields:
        mark = "  <- first difference" if f.name == first else ("  <- differs" if f.differs else "")
        style = "bold red" if f.name == first else ("red" if f.differs else "")
        lines.append([(f"  {f.name:<{width}}  {f.expected:<{left}}  ", ""), (f.actual, style), (mark, style)])
    return lines


def header_lines(line: Timeline) -> list[Line]:
    lines: list[Line] = []
    if line.title:
        lines.append([(line.title, "bold")])
    if line.description:
        lines.append([(line.description, "italic")])
    lines.append([(line.header, "")])
    if line.target is not None:
        if line.diverges_at is None:
            lines.append([(f"{line.target} agrees with the spec at every step", "bold green")])
        elif line.diverges_at == 0:
            lines.append([(f"{line.target} diverges when the store is built", "bold red")])
        else:
            lines.append([(f"{line.target} diverges at step {line.diverges_at}", "bold red")])
    lines.extend(field_lines(line.constructor, "constructor" if line.constructor else None))
    for note in line.notes:
        lines.append([(note, "italic")])
    lines.append([(LEGEND, "dim")])
    return lines


# Every segment is escaped where it is written (keys are any string the spec
# allows: controls, bidirectional overrides, lone surrogates), not where it is made.
def _plain(line: Line, full: bool = False) -> str:
    """A line as plain text, within ``WIDTH`` unless ``full`` (a put of a
    thousand objects is one call, a store of a thousand keys one row: cut,
    not wrapped)."""
    text = printable("".join(text for text, _ in line).rstrip())
    return text if full else clip(text)


def _console(file: IO[str], width: int | None = None) -> Console:
    """Panels no wider than ``WIDTH`` (rich wraps what is longer)."""
    wide = width or min(shutil.get_terminal_size().columns, WIDTH)
    return Console(file=file, force_terminal=True, width=wide, highlight=False)


def folded(line: Timeline) -> list[tuple[Step, list[Line]]]:
    """Each step with its lines, a run of the same call that shows the same
    picture every time folded into one, titled "steps 2-40/70 ... × 39" (a
    call a trace file writes once with ``times``: one step per call would be
    a screen per call). The diverging step stands alone."""
    total = len(line.steps)
    out: list[tuple[Step, list[Line]]] = []
    count = 1
    for step in line.steps:
        body = step_lines(step, total)
        apart = line.diverges_at in (step.number, out[-1][0].number if out else None)
        if out and not apart and out[-1][0].call == step.call and out[-1][1][1:] == body[1:]:
            count += 1
            first = out[-1][0]
            title: Line = [(f"steps {first.number}-{step.number}/{total}  ", "bold"), (step.call, "bold")]
            out[-1] = (first, [[*title, (f"  × {count:,}", "bold")], *body[1:]])
        else:
            count = 1
            out.append((step, body))
    return out


def plain(line: Timeline, full: bool = False) -> str:
    """The whole timeline as plain text (each line within ``WIDTH`` unless ``full``)."""
    out = [_plain(x, full) for x in header_lines(line)]
    for _, body in folded(line):
        out.append("")
        out.extend(_plain(x, full) for x in body)
    return "\n".join(out) + "\n"


def show(
    line: Timeline,
    file: IO[str] | None = None,
    colour: bool | None = None,
    width: int | None = None,
    full: bool = False,
) -> None:
    """Print ``line``: panels when ``file`` (stdout by default) is a terminal
    or ``colour`` is True, plain text otherwise; lines within ``WIDTH``
    unless ``full``."""
    out = file or sys.stdout
    if colour is None:
        colour = out.isatty()
    if not colour:
        out.write(plain(line, full))
        return
    console = _console(out, width)
    for x in header_lines(line):
        console.print(_text(x))
    for step, body in folded(line):
        diverged = line.diverges_at == step.number
        console.print(
            Panel(
                Group(*(_text(x) for x in body[1:])),
                title=_text(body[0]),
                title_align="left",
                border_style="red" if diverged else ("yellow" if step.evicted else "blue"),
            )
        )


def show_step(step: Step, total: int, file: IO[str], colour: bool) -> None:
    """One step, as ``show`` draws each."""
    body = step_lines(step, total)
    if not colour:
        file.write("\n".join(_plain(x) for x in body) + "\n")
        return
    console = _console(file)
    border = "red" if step.outcome_text.startswith("error") else ("yellow" if step.evicted else "blue")
    console.print(
        Panel(Group(*(_text(x) for x in body[1:])), title=_text(body[0]), title_align="left", border_style=border)
    )


def _text(line: Line) -> Text:
    text = Text()
    for part, style in line:
        text.append(printable(part), style=style or None)
    return text
