"""The playground's ``remote`` profile (semantics.md section 13): the learner
plays the engine.

The remote model (``auxspec.models.remote``) is nondeterministic: an outside
engine may evict anything between two calls, so each call has a set of
allowed outcomes, each with the state it leaves. Here every step shows that
set, and the command line says which branch the engine took
(``get a b --outcome missing``: the engine had evicted one of them); without
``--outcome`` the first allowed outcome is taken (a put is stored, a read of
keys that may all be stored finds them). The state shown is the model's:
the keys that may still be stored, with their payloads, and the sets of keys
at least one of which a failed read showed gone.

Only the standard library is imported on this path (the page loads it from
the wheel in Pyodide).
"""

from __future__ import annotations

import shlex
from html import escape
from typing import Any, cast

from auxspec.engine import traces
from auxspec.engine.ops import REENTRANT_FORMS, Op
from auxspec.engine.table import kind_of
from auxspec.models import remote
from auxspec.models.sequential import Err, Outcome
from auxspec.teach.play import Refused, Session, parse_op
from auxspec.teach.timeline import call_text, outcome_text

PROFILE = remote.PROFILE
OUTCOME = "--outcome"
# The op table's rows the remote profile defines; len() and stats() are not part of it (an engine is shared).
DEFINED = frozenset({"put", "get", "read_into", "contains", "close"})
RULES = {
    "ok": "R1/R2: the whole batch stored, or every object read with its last payload",
    "missing": "R1': the engine may have evicted any of the keys read since the last call; the read fails whole",
    "capacity": "R2: the engine refused the batch; none of it is stored",
    "buffer": "R5: the buffer is too short for every object (a store may also ask the engine first: missing)",
    "closed": "R5: a closed store refuses every call but close",
    "true": "the key may still be stored",
    "false": "the engine may have evicted it at any time",
}


def outcome_name(outcome: Outcome) -> str:
    """The word ``--outcome`` takes for ``outcome``: its error kind, ``ok``, or ``true``/``false`` for ``in``."""
    if isinstance(outcome, Err):
        return outcome.kind.value
    if isinstance(outcome.value, bool):
        return "true" if outcome.value else "false"
    return "ok"


def _state_json(state: remote.State) -> dict[str, Any]:
    return {
        "objects": [[key, payload.hex()] for key, payload in state.objects],
        "gone": [list(members) for members in state.gone],
        "closed": state.closed,
    }


def _split_outcome(words: list[str]) -> tuple[list[str], str | None]:
    if OUTCOME not in words:
        return words, None
    at = words.index(OUTCOME)
    if at + 2 != len(words):
        raise Refused(f"{OUTCOME} comes last, with one word: the outcome the engine gave")
    return words[:at], words[at + 1]


def _op(session: Session, words: list[str]) -> Op:
    op = parse_op(session, words)
    if kind_of(op).name not in DEFINED:
        raise Refused(f"{words[0]} is not part of the remote profile (section 13: no client of a shared engine counts)")
    if getattr(op, "form", "list") in REENTRANT_FORMS:
        raise Refused("the remote profile defines no call from inside a call (section 12 is strict and upstream's)")
    return op


def _section(number: int, op: Op, allowed: remote.Allowed, taken: Outcome, after: remote.State) -> str:
    choices = []
    for outcome in allowed.outcomes():
        name = outcome_name(outcome)
        mark = ' class="pg-branch taken" aria-pressed="true"' if outcome == taken else ' class="pg-branch"'
        choices.append(
            f'<li><button type="button"{mark} data-outcome="{escape(name)}">{escape(outcome_text(outcome))}</button>'
            f" <small>{escape(RULES.get(name, ''))}</small></li>"
        )
    stored = ", ".join(f"{key}={payload.hex()}" for key, payload in after.objects) or "nothing"
    gone = "; ".join("{" + ", ".join(members) + "}" for members in after.gone)
    state = f"may still be stored: {stored}" + (f"; at least one gone of each of: {gone}" if gone else "")
    if after.closed:
        state = "closed: every call but close fails"
    return (
        f'<section class="step remote" data-step="{number}">'
        f"<h3>{number}. {escape(call_text(op))}</h3>"
        f"<p>the engine may give any of these; pick what it did:</p><ul class=\"branches\">{''.join(choices)}</ul>"
        f'<p class="outcome">outcome: {escape(outcome_text(taken))}</p>'
        f'<p class="state">{escape(state)}</p></section>'
    )


Run = tuple[str, int | None, list[dict[str, Any]], dict[str, Any] | None, list[Op]]


def run(max_bytes: int, object_nbytes: int, commands: list[str]) -> Run:
    """The header, the capacity (None: not built), each step's view, what was refused and the ops applied."""
    built = remote.new(max_bytes, object_nbytes)
    header = f"store(max_bytes={max_bytes!r}, object_nbytes={object_nbytes!r}, profile='remote')"
    if isinstance(built, Err):
        return f"{header}: not built: {outcome_text(built)}", None, [], None, []
    header += ": the engine decides what fits and what stays"
    state: remote.State = built
    session = Session(max_bytes, object_nbytes, "strict")  # parse_op only reads the object size
    steps: list[dict[str, Any]] = []
    ops: list[Op] = []
    for index, command in enumerate(commands):
        try:
            words, wanted = _split_outcome(shlex.split(command))
            if not words:
                raise Refused("an empty command")
            op = _op(session, words)
            allowed = cast(remote.Allowed, kind_of(op).step(remote, cast(Any, state), op))  # as drivers.remote steps
            names = [outcome_name(o) for o in allowed.outcomes()]
            if wanted is not None and wanted not in names:
                raise Refused(f"the remote profile allows {' or '.join(names)} here, not {wanted!r}")
            taken = allowed.outcomes()[0 if wanted is None else names.index(wanted)]
        except (Refused, ValueError) as why:
            refused = {"index": index, "command": command, "why": str(why)}
            return header, max_bytes // object_nbytes, steps, refused, ops
        after = allowed.after(taken)
        assert after is not None
        steps.append(
            {
                "command": command,
                "call": call_text(op),
                "outcome": traces.outcome_to_json(taken),
                "outcome_text": outcome_text(taken),
                "allowed": names,
                "evicted": [],
                "state": _state_json(after),
                "html": _section(index + 1, op, allowed, taken, after),
            }
        )
        ops.append(op)
        state = after
    return header, max_bytes // object_nbytes, steps, None, ops

