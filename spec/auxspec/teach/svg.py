"""Steps of a timeline as SVG: one row of boxes per moment, least recent key
on the left. Plain SVG 1.1 with inline styles, so a picture shows the same
in a browser, in the docs site and as a file on its own."""

from __future__ import annotations

import html

from auxspec.engine.traces import printable
from auxspec.teach.timeline import (
    EVICTED,
    MOVED,
    NEW,
    PROTECTED,
    READ,
    ROW_ENDS,
    TERMINAL,
    Row,
    Slot,
    Step,
    Timeline,
)


def escape(text: str) -> str:
    """``text`` for HTML and SVG: controls, bidirectional overrides and lone
    surrogates as escapes first (a key may hold any of them), then markup."""
    return html.escape(printable(text))


LABEL_W = 104  # the row label column
BOX_W, BOX_H, GAP = 58, 34, 8
ROW_H = 50
CAPTION_H = 26
MARGIN = 10
FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"

# fill, stroke per tag, strongest first: a slot takes the first that applies.
_COLOURS: tuple[tuple[str, str, str], ...] = (
    ("taken", "#c4b5fd", "#6d28d9"),  # a background batch the writer is applying
    ("queued", "#ede9fe", "#7c3aed"),  # a background batch waiting
    (EVICTED, "#fee2e2", "#dc2626"),
    (TERMINAL, "#fef3c7", "#d97706"),
    (PROTECTED, "#dcfce7", "#16a34a"),
    (READ, "#e0f2fe", "#0284c7"),
    (MOVED, "#f3f4f6", "#6b7280"),
)
_PLAIN = ("#f9fafb", "#9ca3af")
PIN = "#2563eb"


def _colour(slot: Slot) -> tuple[str, str]:
    for tag, fill, stroke in _COLOURS:
        if tag in slot.tags:
            return fill, stroke
    return _PLAIN


def _width(rows: tuple[Row, ...], capacity: int | None = None) -> int:
    widest = max((len(r.slots) + bool(r.hidden) + len(r.unstored) + bool(r.unstored) for r in rows), default=0)
    widest = max(widest, (_drawn_capacity(rows, capacity) or 0) + 1)
    return max(2 * MARGIN + LABEL_W + widest * (BOX_W + GAP) + 40, 420)


def _slot(slot: Slot, x: int, y: int) -> str:
    fill, stroke = _colour(slot)
    classes = " ".join(["slot", *sorted(slot.tags), *(["pinned"] if slot.pins else [])])
    width = 2.5 if NEW in slot.tags else 1.2
    parts = [
        f'<g class="{classes}" data-key="{escape(slot.key)}">',
        f"<title>{escape(slot.key)}: {', '.join(sorted(slot.tags)) or 'stored'}"
        f"{f', {slot.pins} pin(s)' if slot.pins else ''}</title>",
        f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="{fill}" '
        f'stroke="{PIN if slot.pins and EVICTED not in slot.tags else stroke}" stroke-width="{width}"/>',
        f'<text x="{x + BOX_W / 2}" y="{y + BOX_H / 2 + 5}" text-anchor="middle" font-size="14" '
        f'font-family="{FONT}" fill="#111827">{escape(_clip(slot.key))}</text>',
    ]
    if slot.pins:
        cx, cy = x + BOX_W - 2, y + 2
        parts.append(f'<circle cx="{cx}" cy="{cy}" r="9" fill="{PIN}"/>')
        parts.append(
            f'<text x="{cx}" y="{cy + 4}" text-anchor="middle" font-size="11" font-family="{FONT}" '
            f'fill="#ffffff">{slot.pins}</text>'
        )
    if EVICTED in slot.tags:
        parts.append(
            f'<path d="M{x + 4} {y + 4} L{x + BOX_W - 4} {y + BOX_H - 4} M{x + BOX_W - 4} {y + 4} '
            f'L{x + 4} {y + BOX_H - 4}" stroke="#dc2626" stroke-width="2.5"/>'
        )
    parts.append("</g>")
    return "".join(parts)


def _ghost(key: str, count: int, x: int, y: int) -> str:
    """A pin on a key that is not stored: a dashed box outside the store."""
    return (
        f'<g class="slot unstored" data-key="{escape(key)}"><title>{escape(key)}: {count} pin(s), not stored</title>'
        f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="none" stroke="{PIN}" '
        f'stroke-dasharray="4 3"/>'
        f'<text x="{x + BOX_W / 2}" y="{y + BOX_H / 2 + 5}" text-anchor="middle" font-size="13" '
        f'font-family="{FONT}" fill="{PIN}">{escape(_clip(key))}×{count}</text></g>'
    )


def _clip(key: str) -> str:
    return key if len(key) <= 6 else key[:5] + "…"


def _row(row: Row, y: int) -> str:
    parts = [
        f'<g class="row" data-row="{escape(row.label)}">',
        f'<text x="{MARGIN}" y="{y + BOX_H / 2 + 5}" font-size="13" font-family="{FONT}" '
        f'fill="#374151">{escape(row.label)}</text>',
    ]
    x = MARGIN + LABEL_W
    if not row.slots:
        parts.append(
            f'<text x="{x}" y="{y + BOX_H / 2 + 5}" font-size="13" font-family="{FONT}" fill="#9ca3af">(empty)</text>'
        )
        x += BOX_W + GAP
    for index, slot in enumerate(row.slots):
        if row.hidden and index == ROW_ENDS:
            parts.append(
                f'<text class="hidden" x="{x + BOX_W / 2}" y="{y + BOX_H / 2 + 5}" text-anchor="middle" '
                f'font-size="11" font-family="{FONT}" fill="#6b7280">… {row.hidden:,} …</text>'
            )
            x += BOX_W + GAP
        parts.append(_slot(slot, x, y))
        x += BOX_W + GAP
    if row.unstored:
        x += GAP
        for key, count in row.unstored:
            parts.append(_ghost(key, count, x, y))
            x += BOX_W + GAP
    parts.append("</g>")
    return "".join(parts)


def _drawn_capacity(rows: tuple[Row, ...], capacity: int | None) -> int | None:
    """Where the capacity line goes: nowhere when a row may leave keys out
    (a store of more than 2 * ROW_ENDS keys), so a picture stays a few boxes wide."""
    if capacity is None or capacity > 2 * ROW_ENDS or any(row.hidden for row in rows):
        return None
    return capacity


def _rows(rows: tuple[Row, ...], y: int, capacity: int | None = None) -> tuple[list[str], int]:
    capacity = _drawn_capacity(rows, capacity)
    drawn = []
    top = y
    for row in rows:
        drawn.append(_row(row, y))
        y += ROW_H
    if capacity is not None and rows:
        # Where the store is full: keys right of the line must be evicted or the put fails.
        x = MARGIN + LABEL_W + capacity * (BOX_W + GAP) - GAP / 2
        drawn.append(
            f'<g class="capacity"><line x1="{x}" y1="{top - 4}" x2="{x}" y2="{y - ROW_H + BOX_H + 4}" '
            f'stroke="#9ca3af" stroke-dasharray="3 3"/>'
            f'<text x="{x + 3}" y="{y - ROW_H + BOX_H + 14}" font-size="10" font-family="{FONT}" '
            f'fill="#6b7280">capacity {capacity}</text></g>'
        )
    return drawn, y


def _ends(y: int, width: int) -> str:
    return (
        f'<text x="{MARGIN + LABEL_W}" y="{y}" font-size="11" font-family="{FONT}" fill="#6b7280">'
        f"least recent →</text>"
        f'<text x="{width - MARGIN}" y="{y}" text-anchor="end" font-size="11" font-family="{FONT}" '
        f'fill="#6b7280">→ most recent</text>'
    )


def step_svg(step: Step, capacity: int | None = None, standalone: bool = False) -> str:
    """One step's rows as an SVG element, with the capacity line when given."""
    width = _width(step.rows, capacity)
    drawn, bottom = _rows(step.rows, MARGIN + 16, capacity)
    height = bottom + MARGIN + 8
    xmlns = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    return (
        f'<svg{xmlns} class="timeline-step" data-step="{step.number}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="step {step.number}: {escape(step.call)}">'
        f"{_ends(MARGIN + 8, width)}{''.join(drawn)}</svg>"
    )


def timeline_svg(line: Timeline, numbers: tuple[int, ...] | None = None) -> str:
    """The chosen steps (all by default) stacked in one standalone SVG, each
    with its call and outcome as a caption: a picture for the docs."""
    steps = [s for s in line.steps if numbers is None or s.number in numbers]
    return moments_svg(
        line.title or "timeline", tuple((_caption(s), s.rows) for s in steps), line.capacity, [s.number for s in steps]
    )


def moments_svg(
    title: str,
    moments: tuple[tuple[str, tuple[Row, ...]], ...],
    capacity: int | None = None,
    numbers: list[int] | None = None,
) -> str:
    """Captioned groups of rows stacked in one standalone SVG."""
    width = max((_width(rows, capacity) for _, rows in moments), default=420)
    width = max(width, 2 * MARGIN + 9 * max((len(caption) for caption, _ in moments), default=0))
    parts: list[str] = [_ends(MARGIN + 8, width)]
    y = MARGIN + 16
    for index, (caption, rows) in enumerate(moments):
        parts.append(
            f'<text class="caption" x="{MARGIN}" y="{y + 14}" font-size="14" font-weight="bold" '
            f'font-family="{FONT}" fill="#111827">{escape(caption)}</text>'
        )
        drawn, y = _rows(rows, y + CAPTION_H, capacity)
        number = numbers[index] if numbers else index + 1
        parts.append(f'<g class="timeline-step" data-step="{number}">{"".join(drawn)}</g>')
        y += 14
    height = y + MARGIN
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>{"".join(parts)}</svg>\n'
    )


def _caption(step: Step) -> str:
    return f"{step.number}. {step.call} → {step.outcome_text}"
