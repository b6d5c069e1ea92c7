"""A timeline as one self-contained HTML page: inline SVG per step, prev/next
buttons and arrow keys, no network, no external file.

The page is built for people and for the browser test alike: each step is a
``<section class="step" data-step=N>`` (only the current one is shown), the
page's ``<main>`` says which step is current in ``data-current``, evicted
keys are SVG groups of class ``evicted``, and ``#N`` in the address opens
step N.
"""

from __future__ import annotations

from auxspec.teach.svg import escape, step_svg
from auxspec.teach.timeline import LIST_SHOWN, Field, Step, Timeline, some

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #111827; background: #fff; }
header p { margin: .2rem 0; }
.meta { color: #4b5563; font-family: ui-monospace, monospace; font-size: .9rem; }
nav { display: flex; gap: .5rem; align-items: center; margin: 1rem 0; flex-wrap: wrap; }
nav button { font-size: 1rem; padding: .3rem .8rem; cursor: pointer; }
nav .dot { font-size: .8rem; padding: .15rem .45rem; border-radius: 1rem; border: 1px solid #9ca3af;
           background: #f9fafb; }
nav .dot.evicts { border-color: #dc2626; }
nav .dot.diverges { background: #fee2e2; }
nav .dot.current { background: #2563eb; color: #fff; border-color: #2563eb; }
#position { font-family: ui-monospace, monospace; min-width: 8rem; }
section.step h2 { font-family: ui-monospace, monospace; font-size: 1.05rem; }
section.step ul { font-size: .95rem; }
.outcome-ok { color: #15803d; font-weight: bold; }
.outcome-error { color: #b91c1c; font-weight: bold; }
.legend span { display: inline-block; margin-right: 1rem; font-size: .85rem; }
.legend i { display: inline-block; width: .9rem; height: .9rem; border-radius: 3px; vertical-align: -2px;
            margin-right: .3rem; border: 2px solid; }
table.diff { border-collapse: collapse; font-family: ui-monospace, monospace; font-size: .9rem; }
table.diff td, table.diff th { border: 1px solid #d1d5db; padding: .2rem .5rem; text-align: left; }
table.diff tr.differs td { background: #fef2f2; }
table.diff tr.first td { background: #fee2e2; font-weight: bold; }
.keys { color: #6b7280; font-size: .85rem; }
"""

_LEGEND = (
    ("#dcfce7", "#16a34a", "protected batch key"),
    ("#f9fafb", "#2563eb", "pinned (count in the blue badge)"),
    ("#fef3c7", "#d97706", "released to zero (terminal)"),
    ("#e0f2fe", "#0284c7", "read"),
    ("#fee2e2", "#dc2626", "evicted"),
)

_SCRIPT = """
(function () {
  const steps = Array.from(document.querySelectorAll('section.step'));
  const dots = Array.from(document.querySelectorAll('nav .dot'));
  const main = document.querySelector('main');
  const position = document.getElementById('position');
  let current = 0;
  function show(index) {
    if (!steps.length) return;
    current = Math.max(0, Math.min(steps.length - 1, index));
    steps.forEach((s, i) => { s.hidden = i !== current; });
    dots.forEach((d, i) => { d.classList.toggle('current', i === current); });
    main.dataset.current = String(current + 1);
    position.textContent = 'step ' + (current + 1) + ' of ' + steps.length;
    document.getElementById('prev').disabled = current === 0;
    document.getElementById('next').disabled = current === steps.length - 1;
    if (location.hash !== '#' + (current + 1)) history.replaceState(null, '', '#' + (current + 1));
  }
  document.getElementById('prev').addEventListener('click', () => show(current - 1));
  document.getElementById('next').addEventListener('click', () => show(current + 1));
  dots.forEach((d, i) => d.addEventListener('click', () => show(i)));
  document.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowRight' || e.key === 'ArrowDown') { show(current + 1); e.preventDefault(); }
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowUp') { show(current - 1); e.preventDefault(); }
    else if (e.key === 'Home') { show(0); e.preventDefault(); }
    else if (e.key === 'End') { show(steps.length - 1); e.preventDefault(); }
  });
  const wanted = parseInt(location.hash.slice(1), 10);
  show(Number.isNaN(wanted) ? parseInt(main.dataset.start, 10) - 1 : wanted - 1);
})();
"""


def _fields(fields: tuple[Field, ...], first: str | None) -> str:
    if not fields:
        return ""
    rows = ["<tr><th></th><th>expected (spec)</th><th>actual (target)</th><th></th></tr>"]
    for f in fields:
        kind = "first" if f.name == first else ("differs" if f.differs else "")
        mark = "◀ first difference" if f.name == first else ("differs" if f.differs else "")
        rows.append(
            f'<tr class="{kind}" data-field="{escape(f.name)}"><td>{escape(f.name)}</td><td>{escape(f.expected)}</td>'
            f"<td>{escape(f.actual)}</td><td>{mark}</td></tr>"
        )
    return f'<table class="diff">{"".join(rows)}</table>'


def step_section(step: Step, line: Timeline) -> str:
    """One step as the page's ``<section class="step">`` (hidden until shown); the playground shows these too."""
    outcome_class = "outcome-ok" if step.outcome_text.startswith("ok") else "outcome-error"
    items = [f'<li>outcome: <span class="{outcome_class}">{escape(step.outcome_text)}</span></li>']
    if step.pins:
        items.append(f"<li>pins: {escape(some([f'{k}={n}' for k, n in step.pins]))}</li>")
    if step.protected:
        items.append(f"<li>protected: {escape(some(step.protected))}</li>")
    if step.terminal:
        items.append(f"<li>terminal (released to zero, in order): {escape(some(step.terminal))}</li>")
    for reason in step.evicted[:LIST_SHOWN]:
        items.append(f'<li class="evicted-key">evicted: <b>{escape(reason.key)}</b>, {escape(reason.why)}</li>')
    if len(step.evicted) > LIST_SHOWN:
        items.append(f"<li>… {len(step.evicted) - LIST_SHOWN:,} more evicted</li>")
    items.extend(f"<li>{escape(note)}</li>" for note in step.notes)
    evicted = " ".join(r.key for r in step.evicted[:LIST_SHOWN])
    return (
        f'<section class="step" id="step-{step.number}" data-step="{step.number}" data-evicted="{escape(evicted)}" '
        f'data-outcome="{escape(step.outcome_text)}" hidden>'
        f"<h2>{step.number}. {escape(step.call)}</h2>"
        f"{step_svg(step, line.capacity)}<ul>{''.join(items)}</ul>"
        f"{_fields(step.actual, step.first_difference)}</section>"
    )


def legend() -> str:
    """What the colours of the pictures mean, as the page's legend shows it."""
    return "".join(
        f'<span><i style="background:{fill};border-color:{stroke}"></i>{escape(text)}</span>'
        for fill, stroke, text in _LEGEND
    )


def page(line: Timeline) -> str:
    """The whole page."""
    title = line.title or "auxspec explain"
    verdict = ""
    if line.target is not None:
        if line.diverges_at is None:
            verdict = f"<p><b>{escape(line.target)}</b> agrees with the spec at every step.</p>"
        else:
            where = "when the store is built" if line.diverges_at == 0 else f"at step {line.diverges_at}"
            verdict = f'<p class="outcome-error">{escape(line.target)} diverges {where}.</p>'
    dots = "".join(
        f'<button class="dot{" evicts" if s.evicted else ""}{" diverges" if s.number == line.diverges_at else ""}"'
        f' title="{escape(s.call)}">{s.number}</button>'
        for s in line.steps
    )
    start = line.diverges_at or 1
    notes = "".join(f"<p>{escape(n)}</p>" for n in line.notes)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head>'
        f"<body><header><h1>{escape(title)}</h1>"
        f"{f'<p>{escape(line.description)}</p>' if line.description else ''}"
        f'<p class="meta">{escape(line.header)}</p>{verdict}{notes}'
        f"{_fields(line.constructor, 'constructor' if line.constructor else None)}"
        f'<p class="legend">{legend()}</p></header>'
        f'<main data-current="0" data-start="{start}" data-steps="{len(line.steps)}">'
        f'<nav><button id="prev">◀ prev</button><span id="position"></span><button id="next">next ▶</button>'
        f'{dots}<span class="keys">(← → keys)</span></nav>'
        f"{''.join(step_section(s, line) for s in line.steps)}"
        f"{'' if line.steps else '<p>No ops to step through.</p>'}"
        f"</main><script>{_SCRIPT}</script></body></html>\n"
    )
