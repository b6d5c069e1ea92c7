"""What the docs site's playground (docs/playground.md) calls, in the browser,
through Pyodide: a session as JSON in, its views as JSON out.

A session is a store's sizes, a profile and the ``auxspec play`` command lines
typed so far (``put a b --retain a``, ``get a``, ``read a --buffer 4``,
``retain a``, ``release a``, ``close``, ...). Every call recomputes the whole
session with ``timeline``, as ``auxspec play`` does, so undo is dropping the
last line and the page holds no store state of its own. Each step comes back
as the HTML section ``auxspec explain --html`` draws for it, with the model's
state after it, so a test can hold the page against the reference model.

``--from-inside CALL`` on a put, get or read makes its batch or key list a
generator that first calls the store again (the op alphabet's reentrant
forms; the step says the inner call is refused, semantics.md section 12).
The ``remote`` profile (section 13) has no single outcome per call: its
sessions go to ``remote_play``, whose steps list every outcome the model
allows and take the one ``--outcome`` names.

Only the standard library is imported on this path (no ``rich``, no
``hypothesis``): the page loads this module from the built wheel.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from auxspec.engine import traces
from auxspec.engine.ops import Trace
from auxspec.models.sequential import PROFILES, State
from auxspec.teach import remote_play
from auxspec.teach.html import legend, step_section
from auxspec.teach.play import Refused, Session, parse_op
from auxspec.teach.timeline import Timeline, timeline

TITLE = "playground"
PAGE_PROFILES = (*PROFILES, remote_play.PROFILE)
NO_VECTOR = (
    "the remote profile has no vector file: it allows several outcomes per call, and a vector expects one; "
    "docs/remote.md judges a remote store against it"
)
MAX_COMMANDS = 200  # a session longer than this is refused: each call replays all of it


class BadSession(ValueError):
    """A request the page should not have sent (not a command a learner typed)."""


def _session(request: Any) -> tuple[Session, list[str]]:
    if not isinstance(request, dict):
        raise BadSession("a session is a JSON object")
    profile, commands = request.get("profile"), request.get("commands", [])
    if profile not in PAGE_PROFILES:
        raise BadSession(f"profile is one of {', '.join(PAGE_PROFILES)}, not {profile!r}")
    sizes: list[int] = []
    for name in ("max_bytes", "object_nbytes"):
        size = request.get(name)
        if not isinstance(size, int) or isinstance(size, bool):
            raise BadSession(f"{name} is a whole number, not {size!r}")
        sizes.append(size)
    if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
        raise BadSession("commands is a list of command lines")
    if len(commands) > MAX_COMMANDS:
        raise BadSession(f"at most {MAX_COMMANDS} commands")
    return Session(sizes[0], sizes[1], profile), commands


def _state_json(state: State) -> dict[str, Any]:
    return {
        "entries": [[key, payload.hex()] for key, payload in state.entries],
        "references": [[key, count] for key, count in state.refs],
        "closed": state.closed,
    }


def _parse(session: Session, commands: list[str]) -> tuple[list[str], dict[str, Any] | None]:
    """The ops of the commands, up to the first one refused, and why it was."""
    for index, command in enumerate(commands):
        try:
            words = shlex.split(command)
            if not words:
                raise Refused("an empty command")
            session.ops.append(parse_op(session, words))
        except (Refused, ValueError) as why:
            return commands[:index], {"index": index, "command": command, "why": str(why)}
    return commands, None


def _run(request_json: str) -> tuple[Session, Timeline, list[dict[str, Any]], dict[str, Any] | None]:
    """The session, its timeline, the views of its defined steps and what was refused."""
    session, commands = _session(json.loads(request_json))
    accepted, refused = _parse(session, commands)
    line = timeline(session.trace, TITLE)
    steps: list[dict[str, Any]] = []
    for step, command in zip(line.steps, accepted, strict=False):
        if step.outcome is None or step.state is None:
            why = f"the {session.profile} profile leaves this input undefined ({step.notes[0]}); not applied"
            refused = {"index": step.number - 1, "command": command, "why": why}
            break
        steps.append(
            {
                "command": command,
                "call": step.call,
                "outcome": traces.outcome_to_json(step.outcome),
                "outcome_text": step.outcome_text,
                "evicted": [reason.key for reason in step.evicted],
                "state": _state_json(step.state),
                "html": step_section(step, line),
            }
        )
    return session, line, steps, refused


def view(request_json: str) -> str:
    """The session ``request_json`` describes, step by step (see the module
    docstring). A command the session cannot act on ends it and comes back
    as ``refused``, with the reason ``auxspec play`` gives."""
    session, commands = _session(json.loads(request_json))
    if session.profile == remote_play.PROFILE:
        header, capacity, steps, refused, _ = remote_play.run(session.max_bytes, session.object_nbytes, commands)
        return json.dumps({"header": header, "capacity": capacity, "steps": steps, "refused": refused, "legend": ""})
    _, line, steps, refused = _run(request_json)
    return json.dumps(
        {"header": line.header, "capacity": line.capacity, "steps": steps, "refused": refused, "legend": legend()}
    )


def export(request_json: str, name: str = "playground") -> str:
    """The session's applied commands as a vector file (the trace format,
    with the spec's expected outcomes), which ``auxspec reproduce`` and
    ``auxspec verify TARGET --vectors FILE`` replay. Under ``remote``, which
    no vector can hold, the reason why not (``NO_VECTOR``)."""
    if json.loads(request_json).get("profile") == remote_play.PROFILE:
        return NO_VECTOR
    session, _, steps, _ = _run(request_json)
    trace = session.trace
    kept = Trace(trace.profile, trace.max_bytes, trace.object_nbytes, trace.ops[: len(steps)])
    what = "; ".join(step["command"] for step in steps) or "no ops"
    return traces.dumps(traces.vector_from_trace(kept, name, f"from the docs site's playground: {what}"))
