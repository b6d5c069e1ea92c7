"""The port protocol (docs/protocol.md): JSON Lines over a process's stdin and
stdout, requests in the op alphabet of the trace files.

``ProcessTarget`` (made by ``process_target``) drives a port process; its
stores raise the exceptions the binding gives each error kind, so
``ops.apply`` classifies them back and a port in any language is compared
exactly like a Python one. Protocol 2 opens with a handshake (``hello``) in
which the port declares what it offers; the target then has exactly those
features (``engine.ops``), so nothing undeclared is ever sent. A port that
makes no handshake is protocol 1 and is driven with ``CORE``.

Every wait on the port is bounded: each answer must come, whole and within
``MAX_LINE`` bytes, before the per-op timeout; requests are written within
it too; the port's stderr is drained all the time by a thread that keeps
its tail for the report; closing waits at most the timeout, then kills.

``serve`` is the port side for any Python target.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import IO, Any, cast

from auxspec.engine.compare import apply, observed_steps
from auxspec.engine.ops import (
    CORE,
    OBSERVE,
    READ_INTO,
    STATS,
    Close,
    Contains,
    Features,
    Get,
    Op,
    Put,
    ReadInto,
    SpelledFloat,
    SpelledInt,
    plain_key,
)
from auxspec.engine.table import BY_NAME, STATS_FIELDS, kind_of
from auxspec.engine.target import NotRunnable, Observe, PortBroken, Target, load_target
from auxspec.engine.traces import (
    MAX_LINE,
    TraceError,
    op_from_json,
    op_to_json,
    outcome_to_json,
    parse_json,
    printable,
)
from auxspec.models import sequential as model
from auxspec.models.sequential import Kind
from auxspec.reference import binding
from auxspec.reference.store import Snapshot as StoreSnapshot

KINDS = {kind.value for kind in Kind}
# The error a port answers when it cannot get the memory a valid call needs:
# not a spec outcome, so verify reports the input as not runnable there.
RESOURCES = "resources"
PROTOCOL = 2  # the highest protocol version this side speaks
# What a port may declare in the handshake, and the feature (engine.ops) each
# gives the target; "snapshot" and "background" are not op features.
CAPABILITIES: dict[str, str | None] = {
    "read_into": READ_INTO,
    "observe": OBSERVE,
    "stats": STATS,
    "snapshot": None,
    "background": None,
    "batch": None,  # pipelining: many requests per message (docs/protocol.md, "Pipelining")
}
SHOWN = {
    "read_into": "read_into",
    "observe": "the observations flush, len, in and with",
    "stats": "stats",
    "snapshot": "snapshot (the state after each op; outcomes only without it)",
}
STDERR_TAIL = 2000  # bytes of the port's stderr kept for the report
# The first request to a process waits at least this long: it includes the
# process's start (an interpreter importing its modules on a loaded machine).
START_TIMEOUT = 20.0
# The longest per-op timeout taken: a day. Longer is no timeout at all, and
# past about 1e9 s the waits themselves overflow (select, monotonic deadlines).
MAX_OP_TIMEOUT = 86400.0
_EXIT_POLL = 0.1  # seconds between checks that a port waited for is still running
MAX_ANSWER_INT = 1 << 63  # an integer in an answer beyond this is not a count any store has
# Pipelining: the most requests one message may hold (either side refuses more),
# and what verify puts in one, so that a message and its answer stay far
# below the line limit: its requests' bytes, and a bound on its answer's.
MAX_BATCH = 1024
BATCH_REQUEST_BYTES = 1 << 20
# A trace's first message: at most this many requests and bytes of them; both
# then doubled or halved by how long answers take (``ProcessStore._request``).
FIRST_BATCH, FIRST_BATCH_BYTES = 64, 64 << 10
QUICK_MESSAGE, SLOW_MESSAGE = 0.1, 0.5  # seconds
BATCH_ANSWER_BYTES = 8 << 20
_HEX_DIGITS = b"0123456789abcdef"
_ANSWER_KEYS = {"id", "ok", "error", "message"}


def schema() -> dict[str, Any]:
    """The JSON Schema of the protocol's messages, shipped in the package."""
    text = importlib.resources.files("auxspec").joinpath("schemas", "protocol.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


class ProtocolError(PortBroken):
    """The port process broke the protocol (exited, hung, printed garbage)."""


class MessageLost(ProtocolError):
    """A pipelined message got no whole answer (the port exited, hung or
    ended its output): which of its requests did it is not known, so the
    store replays them one at a time (``ProcessStore``)."""


class _Broken(Exception):
    """Raised inside ``PortProcess``: what went wrong, before it is told apart
    as at the start or mid-run."""


class _Gone(_Broken):
    """The port ended its stdout (exited, or closed it) or did not answer in
    time: for a handshake, what a protocol 1 port may do with an unknown op."""


def check_op_timeout(seconds: object) -> float:
    """``seconds`` as a per-op timeout: a positive number up to ``MAX_OP_TIMEOUT``.

    raises: ValueError"""
    if (
        not isinstance(seconds, (int, float))
        or isinstance(seconds, bool)
        or not 0 < seconds <= MAX_OP_TIMEOUT  # NaN fails it too
    ):
        raise ValueError(
            f"the per-op timeout must be a positive number of seconds up to {MAX_OP_TIMEOUT:g}, not {seconds!r}"
        )
    return float(seconds)


def parse_command(command: str) -> list[str]:
    """``command`` split as a shell would (without running one).

    raises: ValueError (an unbalanced quote, or nothing to run)
    """
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise ValueError(f"cannot parse the port command {command!r}: {error}") from None
    if not argv:
        raise ValueError("the port command is empty")
    return argv


@dataclass(frozen=True)
class Handshake:
    """What a port declared: its protocol version and capabilities (protocol
    1, no handshake: ``read_into`` and snapshots tried, as before protocol 2)."""

    protocol: int
    capabilities: frozenset[str]
    unknown: tuple[str, ...] = ()  # declared names this side does not know (ignored)

    @property
    def features(self) -> Features:
        if self.protocol == 1:
            return CORE
        return frozenset(f for name in self.capabilities if (f := CAPABILITIES.get(name)) is not None)

    def skipped(self) -> list[str]:
        """What verify leaves out for this port, for people."""
        if self.protocol == 1:
            return [
                "protocol 1 (no handshake): driven with put, get, read_into and close, snapshots tried; "
                f"not driven: {SHOWN['observe']}, stats"
            ]
        left = [SHOWN[name] for name in SHOWN if name not in self.capabilities]
        lines = [f"not declared, so not driven: {', '.join(left)}"] if left else []
        if "background" in self.capabilities:
            lines.append("background store: declared, but not driven (background stores are verified in-process)")
        if self.unknown:
            lines.append(f"unknown capabilities ignored: {', '.join(map(printable, self.unknown))}")
        return lines


V1 = Handshake(1, frozenset({"read_into", "snapshot"}))


def _handshake_from(reply: dict[str, Any]) -> Handshake:
    value = reply.get("ok")
    if not isinstance(value, dict) or set(value) != {"protocol", "capabilities"}:
        raise _Broken(f'the handshake answer must be {{"protocol": {PROTOCOL}, "capabilities": [...]}}, got {value!r}')
    version, declared = value["protocol"], value["capabilities"]
    if type(version) is not int or version != PROTOCOL:
        raise _Broken(f"the port declared protocol {version!r}; this side speaks {PROTOCOL}")
    if not isinstance(declared, list) or not all(isinstance(name, str) for name in declared):
        raise _Broken(f"capabilities must be a list of strings, got {declared!r}")
    known = frozenset(name for name in declared if name in CAPABILITIES)
    return Handshake(version, known, tuple(sorted(set(declared) - known)))


# ------------------------------------------------------------ the answers


def _int(value: Any) -> bool:
    return type(value) is int and 0 <= value < MAX_ANSWER_INT


def _is_hex(value: Any) -> bool:
    # Deleting the digits from the ASCII bytes leaves nothing: a C loop over a
    # byte table, about 35x a regular expression's pace on a 24 KB payload.
    return (
        isinstance(value, str)
        and len(value) % 2 == 0
        and value.isascii()
        and not value.encode("ascii").translate(None, _HEX_DIGITS)
    )


def _null(value: Any) -> bool:
    return value is None


def _stats(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == set(STATS_FIELDS) and all(_int(v) for v in value.values())


def _snapshot(value: Any) -> bool:
    if type(value) is not dict or value.keys() != {"entries", "references", "closed"}:
        return False
    entries, references = value["entries"], value["references"]
    if type(entries) is not list or type(references) is not list or type(value["closed"]) is not bool:
        return False
    for entry in entries:  # (JSON makes no subclasses: exact types)
        if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not str or type(entry[1]) is not str:
            return False
        if len(entry[1]) % 2:
            return False
    # Every payload's digits at once: one pass over their concatenation.
    if not _is_hex("".join([entry[1] for entry in entries])):
        return False
    return all(type(r) is list and len(r) == 2 and type(r[0]) is str and _int(r[1]) for r in references)


# The "ok" each op may answer; any other is a protocol error.
OK_VALUES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "hello": (lambda v: isinstance(v, dict), '{"protocol": 2, "capabilities": [...]}'),
    "new": (_null, "null"),
    "put": (_null, "null"),
    "close": (_null, "null"),
    "flush": (_null, "null"),
    "enter": (_null, "null"),
    "exit": (_null, "null"),
    "get": (_is_hex, "lowercase hex"),
    "read_into": (_is_hex, "lowercase hex"),
    "len": (_int, "a count"),
    "contains": (lambda v: type(v) is bool, "true or false"),
    "stats": (_stats, f"an object of the counts {', '.join(STATS_FIELDS)}"),
    "snapshot": (_snapshot, '{"entries": [[key, hex]...], "references": [[key, count]...], "closed": bool}'),
}


def check_answer(op: str, reply: Any, request_id: int, unsupported: bool = False) -> dict[str, Any]:
    """``reply`` if it is a well-formed answer to request ``request_id`` of
    ``op``; else a ``_Broken`` saying how it is not. ``unsupported``: the
    answer may be the error ``unsupported`` (a protocol 1 snapshot)."""
    if not isinstance(reply, dict) or type(reply.get("id")) is not int or reply["id"] != request_id:
        raise _Broken(f"the answer has the wrong id (wanted {request_id}): {_answer_shown(reply)}")
    if set(reply) - _ANSWER_KEYS:
        extra = sorted(set(reply) - _ANSWER_KEYS)
        raise _Broken(f"the answer has fields the protocol does not: {extra}: {_answer_shown(reply)}")
    if ("ok" in reply) == ("error" in reply):
        raise _Broken(f'the answer needs exactly one of "ok" and "error": {_answer_shown(reply)}')
    if "message" in reply and not isinstance(reply["message"], str):
        raise _Broken(f"the message must be a string: {_answer_shown(reply)}")
    if "error" in reply:
        allowed = reply["error"] in KINDS or reply["error"] == RESOURCES
        if not (allowed or (unsupported and reply["error"] == "unsupported")):
            raise _Broken(f"the answer has an unknown error kind: {_answer_shown(reply)}")
        return reply
    valid, what = OK_VALUES[op]
    if not valid(reply["ok"]):
        raise _Broken(f"the answer to {op} must have ok {what}: {_answer_shown(reply)}")
    return reply


def _answer_shown(reply: Any) -> str:
    """An answer for the report (made only when it is wrong: a snapshot's costs O(store))."""
    return printable(json.dumps(reply))[:200]


# -------------------------------------------------------------- the process


class PortProcess:
    """One running port; requests go out one at a time and wait, bounded,
    for their answer."""

    def __init__(self, command: str, op_timeout: float = 5.0, earlier_answers: int = 0) -> None:
        self.command = command
        self.op_timeout = op_timeout
        self.next_id = 1
        # Requests answered, by this process and the earlier ones of its run:
        # once any was, a break is a counterexample, not a port that cannot run.
        self.answered = earlier_answers
        self._pending = bytearray()  # read from stdout past the last answer line
        # Pipelining: each request sent ahead in a message, (id, body), in
        # order, and the messages whose answers are not all taken yet.
        self._ahead: deque[tuple[int, dict[str, Any]]] = deque()
        self.taken: dict[str, Any] = {}  # the body of the request answered last
        self.answer_seconds = 0.0  # how long the last message took to be answered
        self._messages: deque[_Message] = deque()
        self._waiting = op_timeout
        self._tail = bytearray()
        self._tail_lock = threading.Lock()
        try:
            check_op_timeout(op_timeout)
        except ValueError as error:
            raise ProtocolError(str(error)) from None
        try:
            argv = parse_command(command)
            # Its own process group: what it forks is ended with it (``_end_group``).
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                start_new_session=True,
            )
        except (OSError, ValueError) as error:
            raise ProtocolError(f"cannot start {command!r}: {error}", at_start=earlier_answers == 0) from None
        assert self.process.stdin and self.process.stdout and self.process.stderr
        self._in, self._out = self.process.stdin.fileno(), self.process.stdout.fileno()
        os.set_blocking(self._in, False)
        self._drainer = threading.Thread(
            target=self._drain, args=(self.process.stderr.fileno(),), name="auxspec-port-stderr", daemon=True
        )
        self._drainer.start()

    def alive(self) -> bool:
        return self.process.poll() is None

    # ------------------------------------------------------------ requests

    def hello(self) -> Handshake | None:
        """The port's handshake; ``V1`` for a port that answers it with an
        error; None when it ended or said nothing in time (a protocol 1 port
        may exit on an op it does not know: it is then killed, to be started
        anew)."""
        body = {"op": "hello", "protocol": PROTOCOL}
        try:
            reply = self._exchange(body, unsupported=True, any_error=True)
        except _Gone:
            self.kill()
            return None
        except _Broken as broken:
            self.kill()
            raise ProtocolError(f"handshake: {broken}", at_start=self.answered == 0) from None
        if "error" in reply:
            return V1
        try:
            return _handshake_from(reply)
        except _Broken as broken:
            self.kill()
            raise ProtocolError(f"handshake: {broken}", at_start=self.answered == 0) from None

    def request(self, body: dict[str, Any] | Call, unsupported: bool = False) -> dict[str, Any]:
        """The answer to ``body``; a ``ProtocolError`` (and the process killed,
        so it is never read half-way again) when it breaks the protocol. A
        request already sent ahead (``send_ahead``) takes its answer from its
        message's; ``body`` must then be the next one sent (a ``Call`` is
        checked by its op, and encoded only if it is sent alone)."""
        self._ahead_lost = False
        try:
            if self._ahead:
                reply = self._take(body, unsupported)
            else:
                self.taken = body if isinstance(body, dict) else body.build()
                reply = self._exchange(self.taken, unsupported)
        except _Gone as gone:
            self.kill()
            lost = MessageLost if self._ahead_lost else ProtocolError
            raise lost(str(gone) + self._stderr_tail(), at_start=self.answered == 0) from None
        except _Broken as broken:
            self.kill()
            raise ProtocolError(str(broken) + self._stderr_tail(), at_start=self.answered == 0) from None
        self.answered += 1
        return reply

    # -------------------------------------------------------------- pipelining

    def next_ahead(self) -> dict[str, Any] | None:
        """The next request sent ahead whose answer is not taken, if any."""
        return self._ahead[0][1] if self._ahead else None

    @property
    def in_flight(self) -> int:
        """Messages sent ahead whose answers are not all taken."""
        return len(self._messages)

    def send_ahead(self, requests: list[tuple[dict[str, Any], str]]) -> None:
        """Send ``requests`` (each body, and its ``request_line`` without an
        id) as one message, a JSON array of requests; their answers are
        taken, in order, by the next ``request`` calls."""
        assert 0 < len(requests) <= MAX_BATCH
        first = self.next_id
        self.next_id += len(requests)
        lines = (f'{{"id": {first + i}, {line[1:]}' for i, (_, line) in enumerate(requests))
        line = "[" + ", ".join(lines) + "]\n"
        bodies = [body for body, _ in requests]
        self._waiting = self.op_timeout * len(bodies)
        with contextlib.suppress(_Broken):  # it is gone: the first answer taken says so, at its request
            self._write(line.encode(), time.monotonic() + self._waiting)
        self._messages.append(_Message(first, len(bodies), sent=time.monotonic()))
        self._ahead.extend((first + i, body) for i, body in enumerate(bodies))

    def abandon(self) -> None:
        """Read and drop the answers to every request sent ahead (a trace that
        stopped before its end, perhaps for the phase's time: so within one
        per-op timeout in all); a port that does not answer them by then is
        killed, to be started again for the next store."""
        self._ahead.clear()
        deadline = time.monotonic() + self.op_timeout
        while self._messages:
            message = self._messages.popleft()
            if message.answers is None:
                try:
                    self._read_message(message, deadline)
                except _Broken:
                    self._messages.clear()
                    self.kill()

    _ahead_lost = False  # the message being read got no whole answer

    def _take(self, body: dict[str, Any] | Call, unsupported: bool) -> dict[str, Any]:
        request_id, sent = self._ahead.popleft()
        # The compare loop and the plan are made from the same trace, so they
        # agree unless verify has a bug; a Call is checked by its op alone
        # (encoding it again would cost as much as sending it).
        if sent != body if isinstance(body, dict) else sent["op"] != body.name:
            raise AssertionError(f"request {request_id} was sent ahead as {sent}, but {body} is asked")
        self.taken = sent
        message = self._messages[0]
        if message.answers is None:
            self._ahead_lost = True
            message.answers = self._read_message(message)
            self.answer_seconds = time.monotonic() - message.sent
            self._ahead_lost = False
        position = request_id - message.first
        if position == message.count - 1:
            self._messages.popleft()
        if position >= len(message.answers):
            raise _Broken(
                f"the answer to the message of requests {message.first}-{message.first + message.count - 1} "
                f"holds {len(message.answers)} answers: none for request {request_id} ({_shown(sent)})"
            )
        try:
            reply = check_answer(str(sent["op"]), message.answers[position], request_id, unsupported)
        except _Broken as broken:
            raise _Broken(f"{broken} (request {request_id} of a message: {_shown(sent)})") from None
        if position == message.count - 1 and len(message.answers) > message.count:
            raise _Broken(
                f"the answer to the message of requests {message.first}-{request_id} holds "
                f"{len(message.answers)} answers for its {message.count} requests"
            )
        return reply

    def _read_message(self, message: _Message, deadline: float | None = None) -> list[Any]:
        """The answer line of a message, a JSON array of answers, within the
        per-op timeout times its requests (or by ``deadline``)."""
        self._waiting = self.op_timeout * message.count
        line = self._read_line(time.monotonic() + self._waiting if deadline is None else deadline)
        last = message.first + message.count - 1
        try:
            # No walk for the nesting limit: an answer nested deeper than a
            # well-formed one is refused by check_answer's shapes anyway.
            answers = json.loads(line.decode("utf-8"))
        except RecursionError:
            raise _Broken(f"the answer to the message of requests {message.first}-{last} is nested too deep") from None
        except (UnicodeDecodeError, ValueError) as error:
            raise _Broken(
                f"the answer to the message of requests {message.first}-{last} is not JSON ({error}): {_show(line)}"
            ) from None
        if not isinstance(answers, list):
            raise _Broken(
                f"the answer to the message of requests {message.first}-{last} must be a JSON array: {_show(line)}"
            )
        return answers

    def _exchange(self, body: dict[str, Any], unsupported: bool = False, any_error: bool = False) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        line = request_line({"id": request_id, **body})
        shown = line if len(line) <= 300 else line[:300] + "..."
        timeout = self.op_timeout if request_id > 1 else max(self.op_timeout, START_TIMEOUT)
        self._waiting = timeout  # for the messages
        deadline = time.monotonic() + timeout
        try:
            self._write((line + "\n").encode(), deadline)
            answer = self._read_line(deadline)
        except _Broken as broken:
            raise type(broken)(f"{broken} (request {shown})") from None
        try:
            reply = parse_json(answer.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise _Broken(f"the answer to request {shown} is not JSON ({error}): {_show(answer)}") from None
        if any_error and isinstance(reply, dict) and isinstance(reply.get("error"), str):
            unsupported = True  # a protocol 1 port answers an unknown op as it likes
            if reply["error"] not in KINDS:
                reply = {**reply, "error": "unsupported"}
        try:
            return check_answer(str(body["op"]), reply, request_id, unsupported)
        except _Broken as broken:
            raise _Broken(f"{broken} (request {shown})") from None

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Gone(f"the port took no input for {self._waiting:g} s")
            # Its answers are read meanwhile: a port writing a long answer
            # does not read its input until that is taken.
            readable, ready, _ = select.select([self._out] if self._messages else [], [self._in], [], left)
            if readable:
                chunk = os.read(self._out, 1 << 20)
                if not chunk:
                    raise _Gone(f"the port ended its output{self._exit_status()}")
                self._pending += chunk
            if not ready:
                continue
            try:
                written = os.write(self._in, view)
            except BlockingIOError:
                continue
            except OSError:  # BrokenPipeError: it exited, or closed its stdin
                raise _Gone(f"the port exited before reading a request{self._exit_status()}") from None
            view = view[written:]

    def _read_line(self, deadline: float) -> bytes:
        """The next answer line, without its newline: at most ``MAX_LINE``
        bytes, refused past that without reading the rest."""
        scanned = 0
        while True:
            end = self._pending.find(b"\n", scanned)
            if end >= 0:
                line = bytes(self._pending[:end])
                del self._pending[: end + 1]
                return line
            scanned = len(self._pending)
            if scanned > MAX_LINE:
                raise _Broken(f"an answer line is longer than the protocol's {MAX_LINE} bytes")
            left = deadline - time.monotonic()
            if left <= 0:
                partial = f" ({scanned} bytes came without a newline)" if scanned else ""
                raise _Gone(f"no answer within {self._waiting:g} s{partial}")
            # Woken now and then to see whether the port has exited: a child it
            # started may hold its stdout open, so no end of output would come.
            ready, _, _ = select.select([self._out], [], [], min(left, _EXIT_POLL))
            if not ready:
                if self.process.poll() is not None:
                    partial = f" after {scanned} bytes without a newline" if scanned else ""
                    raise _Gone(f"the port exited{partial}{self._exit_status()}")
                continue
            chunk = os.read(self._out, 1 << 20)
            if not chunk:
                partial = f" after {scanned} bytes without a newline" if scanned else ""
                raise _Gone(f"the port ended its output{partial}{self._exit_status()}")
            self._pending += chunk

    # ------------------------------------------------------------- stderr

    def _drain(self, fd: int) -> None:
        """Read the port's stderr until it ends, keeping the tail: a chatty
        port never blocks on a full pipe."""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            with self._tail_lock:
                self._tail += chunk
                del self._tail[:-STDERR_TAIL]

    def stderr_tail(self) -> str:
        """The end of what the port wrote to stderr, printable."""
        if not self.alive():
            self._drainer.join(timeout=0.2)  # what it wrote last; a child may keep the pipe open
        with self._tail_lock:
            tail = bytes(self._tail)
        return printable(tail.decode("utf-8", "replace").strip(), newlines=True)

    def _stderr_tail(self) -> str:
        tail = self.stderr_tail()
        return f"; its stderr ends: {tail}" if tail else ""  # already cut to STDERR_TAIL bytes

    def _exit_status(self) -> str:
        try:
            code = self.process.wait(timeout=min(self.op_timeout, 1.0))
        except subprocess.TimeoutExpired:
            return " (it is still running)"
        return f" (it exited with status {code})"

    # ------------------------------------------------------------- the end

    def kill(self) -> None:
        self._ahead.clear()  # nothing sent ahead is answered now
        self._messages.clear()
        self._end_group()  # the port and its children at once, before it is reaped and its pid freed
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._close_pipes()

    def _end_group(self) -> None:
        """Kill whatever the port started that is still running: none of it outlives verify."""
        with contextlib.suppress(OSError):  # the group is empty (ProcessLookupError) or gone
            os.killpg(self.process.pid, signal.SIGKILL)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the port may be gone already
            os.set_blocking(self._in, True)
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=self.op_timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._end_group()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


@dataclass(frozen=True)
class Call:
    """A request not encoded yet: its op, encoded only if it is sent alone
    (sent ahead, it was encoded from the trace's op already)."""

    op: Op

    @property
    def name(self) -> str:
        return self.op.name

    def build(self) -> dict[str, Any]:
        return op_to_json(self.op)


@dataclass
class _Message:
    """Requests sent ahead as one message: their ids, and its answers once read."""

    first: int
    count: int
    answers: list[Any] | None = None
    sent: float = 0.0  # when it was sent (time.monotonic)


def _shown(body: dict[str, Any]) -> str:
    line = request_line(body)
    return line if len(line) <= 300 else line[:300] + "..."


class Hex(str):
    """A payload as ``bytes.hex()`` spells it: lowercase digits only, so it
    goes into a JSON line as it is. ``json.dumps`` scans every character of
    a string for escapes: 91 µs for a 12 KiB object's hex, against 1.5 µs to
    copy it (the bulk of a put's request and of a snapshot's answer)."""

    __slots__ = ()


def _string(value: Any) -> str:
    """``value`` (a key) as JSON: a str by the C escaper alone, without
    ``json.dumps``'s set-up per call; anything else as ``json.dumps`` has it."""
    return encode_basestring_ascii(value) if type(value) is str else json.dumps(value)


def _pairs(pairs: list[Any]) -> str:
    """A list of ``[key, Hex]`` pairs (a put's objects, a snapshot's entries)
    as JSON, each payload as it is; any other item as ``json.dumps`` has it."""
    return (
        "["
        + ", ".join(
            f'[{_string(item[0])}, "{item[1]}"]' if type(item) is list and type(item[1]) is Hex else json.dumps(item)
            for item in pairs
        )
        + "]"
    )


def _holds_hex(pairs: Any) -> bool:
    return type(pairs) is list and any(type(item) is list and len(item) == 2 and type(item[1]) is Hex for item in pairs)


def request_line(request: dict[str, Any]) -> str:
    """``request`` as one JSON line; a size spelled for the protocol
    (``ops.SpelledInt``, ``ops.SpelledFloat``: ``-0``, ``1E0``, ``4.0``)
    goes as that spelling, which ``json.dumps`` would normalise; a put's
    payloads made by ``_wire`` (``Hex``) go as they are."""
    spelled = {name: value.json for name, value in request.items() if isinstance(value, (SpelledInt, SpelledFloat))}
    if _holds_hex(request.get("objects")):
        spelled["objects"] = _pairs(request["objects"])
    if not spelled:
        return json.dumps(request)
    line = json.dumps({name: f"\0{name}" if name in spelled else value for name, value in request.items()})
    for name, text in spelled.items():
        line = line.replace(json.dumps(f"\0{name}"), text, 1)
    return line


def answer_line(request_id: int, reply: dict[str, Any]) -> str:
    """A port's answer to request ``request_id`` as one JSON line; its
    payloads (``Hex``: a read's value, a snapshot's entries) go as they are."""
    ok = reply.get("ok")
    if type(ok) is Hex:
        return f'{{"id": {request_id}, "ok": "{ok}"}}'
    if type(ok) is dict and _holds_hex(ok.get("entries")):
        rest = json.dumps({name: value for name, value in ok.items() if name != "entries"})
        fields = f'"entries": {_pairs(ok["entries"])}' + (", " + rest[1:] if len(rest) > 2 else "}")
        return f'{{"id": {request_id}, "ok": {{{fields}}}'
    return json.dumps({"id": request_id, **reply})


def _show(line: bytes) -> str:
    text = line[:200].decode("utf-8", "replace")
    return repr(text) + (f" ... ({len(line)} bytes)" if len(line) > 200 else "")


def _raise_for(reply: dict[str, Any]) -> None:
    if "error" not in reply:
        return
    kind = reply["error"]  # a kind of KINDS or RESOURCES: check_answer checked it
    if kind == RESOURCES:  # no outcome of the spec's: the input cannot be judged here
        said = f"resources: {reply.get('message', '')}".rstrip(": ")
        raise NotRunnable(f"the port could not get the memory the call needs ({said})", said)
    # The binding's exception for the kind: ops.apply classifies it back. The
    # message is optional in the protocol; a Python store must give one.
    message = str(reply.get("message") or f"{kind} (the port gave no message)")
    raise binding.exception_for(Kind(kind), "strict", message)


class ProcessStore:
    """A store inside a port process, with the Python store API (the calls of
    the ops the port declared).

    Given a ``Plan`` (the trace's calls to come) and a port that declared
    ``batch``, it sends them ahead in messages, at most two in flight, and
    each call takes its answer from them: the compare loop makes the same
    calls and judges the same answers as without one. A message that gets no
    whole answer is replayed: the port is started again, sent the trace's
    calls answered so far one at a time (each must answer as before), and
    the rest goes one request at a time, so a crash is seen at its request."""

    def __init__(
        self,
        port: PortProcess,
        max_bytes: Any,
        object_nbytes: Any,
        plan: Plan | None = None,
        restart: Callable[[], PortProcess] | None = None,
        following: Callable[[], Plan | None] | None = None,
    ) -> None:
        self.port = port
        self._plan = plan
        self._restart = restart  # a new port process with the same handshake (Ports.restart)
        # The next trace's plan, once this one's requests are all sent (Ports.following).
        self._following = following
        # What each op answered so far, for the replay after a lost message.
        self._answered: list[tuple[dict[str, Any], object]] = []
        new = {"op": "new", "max_bytes": max_bytes, "object_nbytes": object_nbytes}
        if plan is not None and plan.new is None:  # a plan started early (Ports.upcoming) sent its new already
            plan.start(new)
        reply = self._request(new)
        if "error" in reply and self._plan is not None:  # the ops sent ahead meet no store: drop them
            self._plan = None
            self.port.abandon()
        _raise_for(reply)

    def _request(self, body: dict[str, Any] | Call, unsupported: bool = False) -> dict[str, Any]:
        plan = self._plan
        if plan is None:
            return self.port.request(body, unsupported)
        if plan.more() and self.port.in_flight <= 1:
            if self.port.answer_seconds > SLOW_MESSAGE:
                plan.limit, plan.byte_limit = max(2, plan.limit // 2), max(1, plan.byte_limit // 2)
            elif self.port.answer_seconds < QUICK_MESSAGE:
                plan.limit = min(MAX_BATCH, plan.limit * 2)
                plan.byte_limit = min(BATCH_REQUEST_BYTES, plan.byte_limit * 2)
            self.port.send_ahead(plan.next_message())
        elif not plan.more() and self._following is not None and self.port.in_flight <= 1:
            # This trace is all sent: the next one's first message goes now, so
            # the port works on it while this one's answers are judged.
            following, self._following = self._following(), None
            if following is not None:
                self.port.send_ahead(following.next_message())
        try:
            reply = self.port.request(body, unsupported)
        except MessageLost:
            return self._replay(body if isinstance(body, dict) else body.build(), unsupported)
        if self.port.taken["op"] != "snapshot":
            self._answered.append((self.port.taken, _fingerprint(reply)))
        return reply

    def _replay(self, body: dict[str, Any], unsupported: bool) -> dict[str, Any]:
        self._plan = None
        assert self._restart is not None
        self.port = self._restart()
        for number, (sent, seen) in enumerate(self._answered, start=1):
            again = self.port.request(sent)
            if _fingerprint(again) != seen:
                self.port.kill()
                raise ProtocolError(
                    f"a pipelined message got no answer, and the port started again answered request {number} "
                    f"of the trace ({_shown(sent)}) otherwise: {seen!r} then {_fingerprint(again)!r}"
                )
        return self.port.request(body, unsupported)

    def _call(self, op: Op | str, **fields: Any) -> Any:
        reply = self._request(Call(op) if not isinstance(op, str) else {"op": op, **fields})
        _raise_for(reply)
        return reply["ok"]

    def put(self, objects: list[Any], *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        items = tuple((obj.key, obj.payload) for obj in objects)
        self._call(Put(items, tuple(retain_keys), tuple(release_keys)))

    def get_concatenated(self, keys: list[Any]) -> bytes:
        return bytes.fromhex(self._call(Get(tuple(keys))))

    def read_into(self, keys: list[Any], buffer: Any) -> int:
        # Counted in bytes whatever the buffer's item size (semantics.md, section 11).
        with memoryview(buffer) as view, view.cast("B") if view.format != "B" else view as flat:
            data = bytes.fromhex(self._call(ReadInto(tuple(keys), flat.nbytes, flat.readonly)))
            if flat.readonly or len(data) > flat.nbytes:  # a read-only buffer must have been refused
                raise ProtocolError(f"read_into answered {len(data)} bytes for a {flat.nbytes}-byte buffer")
            flat[: len(data)] = data
        return len(data)

    def close(self) -> None:
        plan, next_ahead = self._plan, self.port.next_ahead()
        # A close sent ahead is taken as any call (the trace's close op, or the
        # compare's last call); any other request next means the trace stopped
        # before its end: the calls sent ahead are not made.
        if plan is not None and next_ahead != CLOSE and (plan.more() or next_ahead is not None):
            self._plan = None
            self.port.abandon()
        self._call(Close())

    def flush(self) -> None:
        self._call("flush")

    def __len__(self) -> int:
        count: int = self._call("len")
        return count

    def __contains__(self, key: object) -> bool:
        # A str subclass key (ops.KeyStr) goes as its plain value, as op_to_json sends every other key.
        found: bool = self._call("contains", key=plain_key(key) if isinstance(key, str) else key)
        return found

    def stats(self) -> model.Stats:
        counts = self._call("stats")
        return model.Stats(*(counts[name] for name in STATS_FIELDS))

    def __enter__(self) -> ProcessStore:
        self._call("enter")
        return self

    def __exit__(self, *exc: object) -> None:
        self._call("exit")

    def snapshot(self) -> StoreSnapshot | None:
        reply = self._request({"op": "snapshot"}, unsupported=True)
        if reply.get("error") == "unsupported":
            return None
        _raise_for(reply)
        value = reply["ok"]  # check_answer checked its shape
        entries = tuple((k, bytes.fromhex(p)) for k, p in value["entries"])
        references = tuple((k, n) for k, n in value["references"])
        return StoreSnapshot(entries, references, value["closed"])


def _fingerprint(reply: dict[str, Any]) -> object:
    """What a replayed answer must repeat: the error kind, or (a hash of) the value."""
    if "error" in reply:
        return ("error", reply["error"])
    value = reply["ok"]
    return ("ok", hash(value) if isinstance(value, (str, int, type(None))) else json.dumps(value, sort_keys=True))


class Plan:
    """The requests a trace will make, in the order the compare loop makes
    them (``new``, each op, a ``snapshot`` after each op whose state is
    observed), cut into messages of at most ``MAX_BATCH`` requests whose
    bytes, and a bound on their answer's, stay within the batch limits."""

    def __init__(self, ops: tuple[Op, ...], observed: Callable[[int], bool], snapshots: bool) -> None:
        self.ops, self.observed, self.snapshots = ops, observed, snapshots
        self.first: dict[str, Any] | None = None  # the new request, sent in the first message
        self.nbytes = 0  # the store's object size, once known: a read answers twice that per key
        # Requests in the next message: a few at first, doubled while messages
        # are answered quickly and halved when one is slow, so that a phase
        # stopped for time waits for at most about a second of the port's work.
        self.limit, self.byte_limit = FIRST_BATCH, FIRST_BATCH_BYTES
        self._next = 0  # the next op to send
        self._put_bytes = 0  # the bytes of the puts sent: a snapshot's answer is at most 4 times that
        self.new: dict[str, Any] | None = None  # the new request, once started

    def start(self, new: dict[str, Any]) -> None:
        """Begin with the store's ``new`` request (the first message sends it)."""
        object_nbytes = new["object_nbytes"]
        self.first = self.new = new
        self.nbytes = object_nbytes if type(object_nbytes) is int and object_nbytes > 0 else 0

    def more(self) -> bool:
        return self.first is not None or self._next <= len(self.ops)  # the close after the last op too

    def next_message(self) -> list[tuple[dict[str, Any], str]]:
        """The next message's requests: each body, and its line without an id."""
        bodies: list[tuple[dict[str, Any], str]] = []
        sent = answer = 0
        if self.first is not None:
            bodies.append((self.first, request_line(self.first)))
            self.first = None
        while self._next < len(self.ops) and len(bodies) < min(self.limit, MAX_BATCH) - 1:
            op = self.ops[self._next]
            body = _wire(op)
            line = request_line(body)
            size = len(line)
            reads = getattr(op, "keys", ())
            kind = kind_of(op).name
            bound = 2 * size + 64 + (2 * len(reads) * self.nbytes if kind in ("get", "read_into") else 0)
            if kind == "put":
                self._put_bytes += size
            snapshot = self.snapshots and self.observed(self._next)
            if snapshot:
                bound += 4 * self._put_bytes + 200
            too_many = sent + size > min(self.byte_limit, BATCH_REQUEST_BYTES)
            if bodies and (too_many or answer + bound > BATCH_ANSWER_BYTES):
                if kind == "put":
                    self._put_bytes -= size
                break
            bodies.append((body, line))
            if snapshot:
                bodies.append((SNAPSHOT, '{"op": "snapshot"}'))
            sent, answer = sent + size, answer + bound
            self._next += 1
        if self._next == len(self.ops) and len(bodies) < MAX_BATCH:
            bodies.append((CLOSE, '{"op": "close"}'))  # the compare loop closes the store after the last op
            self._next += 1
        return bodies


CLOSE: dict[str, Any] = {"op": "close"}
SNAPSHOT: dict[str, Any] = {"op": "snapshot"}
_PYTHON_ONLY = ("form", "payloads", "shape")  # how a Python caller passes the values: never sent


def _wire(op: Op) -> dict[str, Any]:
    """The request ``op`` makes through ``ProcessStore``'s calls."""
    body = op_to_json(op)
    for name in _PYTHON_ONLY:
        body.pop(name, None)
    objects = body.get("objects")
    if type(objects) is list:  # each payload op_to_json spelled (a str), marked so it is copied as it is
        body["objects"] = [[o[0], Hex(o[1])] if type(o) is list and type(o[1]) is str else o for o in objects]
    if kind_of(op).name == "contains":
        key = cast(Contains, op).key
        body["key"] = plain_key(key) if isinstance(key, str) else key
    return body


class Ports:
    """The port process behind a run: kept across traces, started anew (with
    the same handshake) for the next store after one broke."""

    def __init__(self, command: str, op_timeout: float = 5.0) -> None:
        self.command, self.op_timeout = command, op_timeout
        self.port = PortProcess(command, op_timeout)
        found = self.port.hello()
        if found is None:  # no handshake: a protocol 1 port, started again after the unknown op
            self.port = PortProcess(command, op_timeout)
            found = V1
        self.handshake = found
        # Cross-trace pipelining (``upcoming``): the next trace's plan, not
        # sent yet; then, once its first message went out, that plan and the
        # port it went to, until its compare takes it (``ahead``).
        self._upcoming: Plan | None = None
        self._early: tuple[Plan, PortProcess] | None = None

    def store(self, max_bytes: Any, object_nbytes: Any, plan: Plan | None = None) -> ProcessStore:
        early, self._early = self._early, None
        if not self.port.alive():  # what was sent ahead, early or not, is lost with it
            self.restart()
        if early is None or plan is not early[0] or self.port.next_ahead() is not early[0].new:
            if self.port.in_flight:  # sent ahead, for a trace that stopped early or one sent early: dropped
                self.port.abandon()
            if early is not None and plan is early[0]:  # its early requests were dropped or lost: start again
                plan = self._plan(plan.ops, plan.observed)
        return ProcessStore(self.port, max_bytes, object_nbytes, plan, self.restart, self.following)

    def upcoming(self, trace: Any, every: int = 1) -> None:
        """``Target.upcoming``: the trace compared next, with the state
        observed as ``compare(..., every=every)`` observes it, or None. Its
        new and first ops are sent once the current trace's requests all are."""
        self._upcoming = None
        if trace is None or not trace.ops or "batch" not in self.handshake.capabilities:
            return
        plan = self._plan(trace.ops, observed_steps(len(trace.ops), every))
        plan.start({"op": "new", "max_bytes": trace.max_bytes, "object_nbytes": trace.object_nbytes})
        self._upcoming = plan

    def following(self) -> Plan | None:
        """The upcoming trace's plan, to be sent now (once)."""
        plan, self._upcoming = self._upcoming, None
        if plan is not None:
            if self._early is not None and self._early[1] is self.port:
                return None  # one trace sent early at a time
            self._early = plan, self.port
        return plan

    def restart(self) -> PortProcess:
        """A new port process (the old one is killed), with the same handshake."""
        if self.port.alive():
            self.port.kill()
        self.port = PortProcess(self.command, self.op_timeout, self.port.answered)
        if self.handshake.protocol > 1:
            again = self.port.hello()
            if again != self.handshake:
                self.port.kill()
                raise ProtocolError(f"the restarted port declared {again}, the first one {self.handshake}")
        return self.port

    def ahead(self, ops: tuple[Any, ...], observed: Callable[[int], bool]) -> Callable[[Any, Any], ProcessStore]:
        """A factory whose store sends ``ops`` ahead (``Target.ahead``)."""
        early = self._early[0] if self._early is not None else None
        if early is not None and early.ops is ops and all(early.observed(i) == observed(i) for i in range(len(ops))):
            return lambda max_bytes, object_nbytes: self.store(max_bytes, object_nbytes, early)
        return lambda max_bytes, object_nbytes: self.store(
            max_bytes, object_nbytes, self._plan(ops, observed) if ops else None
        )

    def _plan(self, ops: tuple[Op, ...], observed: Callable[[int], bool]) -> Plan:
        # Each trace starts again from small messages: a long life's wide puts
        # can cost a slow port seconds per KiB, where the trace before was quick.
        return Plan(ops, observed, "snapshot" in self.handshake.capabilities)

    def close(self) -> None:
        if self.port.in_flight:  # a trace sent early that no compare took: its answers are read first
            self.port.abandon()
        self.port.close()


@dataclass
class ProcessTarget:
    """A port process as a target: what it declared, the target with exactly
    those features, and how to stop it."""

    target: Target
    ports: Ports

    @property
    def handshake(self) -> Handshake:
        return self.ports.handshake

    def close(self) -> None:
        self.ports.close()


def process_target(command: str, op_timeout: float = 5.0) -> ProcessTarget:
    """Start the port of ``command`` and shake hands with it.

    raises: ProtocolError (it cannot be started, or breaks the handshake)
    """
    ports = Ports(command, op_timeout)
    shake = ports.handshake
    observe: Observe | None = (lambda store: store.snapshot()) if "snapshot" in shake.capabilities else None
    label = f"process {command!r}" + (f" (protocol {shake.protocol})" if shake.protocol > 1 else "")
    batch = "batch" in shake.capabilities
    ahead, upcoming = (ports.ahead, ports.upcoming) if batch else (None, None)
    return ProcessTarget(Target(label, ports.store, observe, shake.features, ahead=ahead, upcoming=upcoming), ports)


def process_factory(command: str, op_timeout: float = 5.0) -> tuple[Callable[[Any, Any], ProcessStore], Ports]:
    """A store factory over the port process of ``command``, and the ports to close."""
    ports = Ports(command, op_timeout)
    return ports.store, ports


# ------------------------------------------------------------------- serving

# Exit codes of serve (docs/protocol.md).
SERVED, TARGET_RAISED, NOT_PROTOCOL = 0, 1, 3


@dataclass(frozen=True)
class Offer:
    """What ``serve`` declares in the handshake, and how it shows snapshots."""

    capabilities: frozenset[str]
    observe: Observe | None = None


def offer_of(target: Target) -> Offer:
    """What ``target`` can be driven with, as capabilities."""
    found = {name for name, feature in CAPABILITIES.items() if feature is not None and feature in target.features}
    if target.observe is not None:
        found.add("snapshot")
    if target.background is not None:
        found.add("background")
    found.add("batch")  # serve answers a message of many requests in one line
    return Offer(frozenset(found), target.observe)


def _needs(op: str) -> str | None:
    """The capability a request of ``op`` needs, if any."""
    if op == "snapshot":
        return "snapshot"
    row = BY_NAME.get(op)
    feature = row.feature if row is not None else None
    return next((name for name, f in CAPABILITIES.items() if f is not None and f == feature), None)


def serve(
    factory: Callable[[Any, Any], Any],
    stdin: IO[Any] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    offer: Offer | None = None,
) -> int:
    """Answer protocol requests on ``stdin`` with stores from ``factory``.

    With an ``offer`` it speaks protocol 2: it answers ``hello`` with the
    offer and refuses requests for what it did not declare; without one it
    is a protocol 1 port (``hello`` is answered ``unsupported``). Returns
    0 at the end of input; 3 on a request that is not the protocol (reported
    on ``stderr``, by default the process's), as docs/protocol.md says a
    port should; 1 when the target raised an exception that is no error kind.
    """
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout
    err = stderr or sys.stderr
    store: Any = None
    number = 0
    while True:
        raw = stdin.readline(MAX_LINE + 1)
        if not raw:
            return SERVED
        number += 1
        where = f"request line {number}"
        answers: list[str] = []
        try:
            parsed = _request(raw, where)
            if parsed is None:
                continue
            batch = isinstance(parsed, list)
            if batch and (offer is None or "batch" not in offer.capabilities):
                raise TraceError(f"{where}: a message of many requests, but this port did not declare 'batch'")
            for request in parsed if isinstance(parsed, list) else [parsed]:
                if batch and request.get("op") == "hello":
                    raise TraceError(f"{where}: hello inside a message of many requests")
                reply = _answer(request, store, factory, where, offer)
                if "store" in reply:
                    store = reply.pop("store")
                answers.append(answer_line(request["id"], reply))
        except TraceError as error:
            print(f"auxspec serve: {error}", file=err)
            return NOT_PROTOCOL
        except _TargetRaised as error:
            print(f"auxspec serve: {where}: {error}", file=err)
            return TARGET_RAISED
        stdout.write(("[" + ", ".join(answers) + "]" if batch else answers[0]) + "\n")
        stdout.flush()


class _TargetRaised(Exception):
    """The target raised an exception that no error kind stands for."""


def _request(raw: str | bytes, where: str) -> dict[str, Any] | list[dict[str, Any]] | None:
    """The request of one line, or the requests of a message (None for a
    blank line); a ``TraceError`` for a line that is neither."""
    ended = raw.endswith(b"\n") if isinstance(raw, bytes) else raw.endswith("\n")
    if len(raw) > MAX_LINE and not ended:
        raise TraceError(f"{where}: longer than the protocol's {MAX_LINE} bytes (the rest was not read)")
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as error:
        raise TraceError(f"{where}: not UTF-8 ({error})") from None
    if not text.strip():
        return None
    try:
        request = parse_json(text)
    except ValueError as error:
        raise TraceError(f"{where}: not JSON ({error})") from None
    if isinstance(request, list):  # a pipelined message (docs/protocol.md, "Pipelining")
        if not 0 < len(request) <= MAX_BATCH:
            raise TraceError(f"{where}: a message holds 1 to {MAX_BATCH} requests, not {len(request)}")
        if not all(isinstance(r, dict) and type(r.get("id")) is int for r in request):
            raise TraceError(f"{where}: each request of a message needs an integer id")
        return request
    if not isinstance(request, dict) or type(request.get("id")) is not int:
        raise TraceError(f"{where}: needs an integer id")
    return request


def _answer(
    request: dict[str, Any], store: Any, factory: Callable[[Any, Any], Any], where: str, offer: Offer | None
) -> dict[str, Any]:
    op = request.get("op")
    if op == "hello":
        if type(request.get("protocol")) is not int:
            raise TraceError(f"{where}: hello needs the integer protocol its sender speaks")
        if offer is None:
            return {"error": "unsupported", "message": "this port speaks protocol 1 (no handshake)"}
        return {"ok": {"protocol": PROTOCOL, "capabilities": sorted(offer.capabilities)}}
    if op == "new":
        if store is not None:
            with contextlib.suppress(Exception):  # a fresh store replaces it, whatever its state
                store.close()
        try:
            return {"ok": None, "store": factory(request.get("max_bytes"), request.get("object_nbytes"))}
        except MemoryError as error:  # not a spec outcome: the protocol's own answer for it
            return {"error": RESOURCES, "message": f"MemoryError: {error}", "store": None}
        except Exception as error:
            kind = binding.classify("new", error)
            if kind is None:
                raise _TargetRaised(f"new raised {type(error).__name__}: {error}") from None
            return {"error": kind.value, "message": str(error), "store": None}
    if not isinstance(op, str):
        raise TraceError(f'{where}: a request needs "op"')
    needed = _needs(op)
    if offer is not None and needed is not None and needed not in offer.capabilities:
        raise TraceError(f"{where}: {op!r} needs {needed!r}, which this port did not declare in the handshake")
    if store is None:
        raise TraceError(f"{where}: {op!r} before a store was built (after no new, or a failed one)")
    if op == "snapshot":
        return _snapshot_answer(store, offer)
    parsed = op_from_json(request, where)
    try:
        outcome = apply(store, parsed)
    except MemoryError as error:  # not a spec outcome: the protocol's own answer for it
        return {"error": RESOURCES, "message": f"MemoryError: {error}"}
    except Exception as error:
        raise _TargetRaised(f"{op} raised {type(error).__name__}: {error}") from None
    answer = outcome_to_json(outcome)
    if isinstance(getattr(outcome, "value", None), bytes):  # a read's bytes, as bytes.hex() spelled them
        answer["ok"] = Hex(answer["ok"])
    return answer


def _snapshot_answer(store: Any, offer: Offer | None) -> dict[str, Any]:
    observe: Observe | None = offer.observe if offer is not None else None
    if offer is None and hasattr(store, "snapshot"):  # protocol 1: the store's own, if it has one
        observe = lambda s: s.snapshot()  # noqa: E731
    if observe is None:
        return {"error": "unsupported"}
    try:
        seen = observe(store)
    except Exception as error:
        raise _TargetRaised(f"snapshot raised {type(error).__name__}: {error}") from None
    if seen is None:
        return {"error": "unsupported"}
    entries = [[key, Hex(bytes(payload).hex())] for key, payload in seen.entries]
    return {"ok": {"entries": entries, "references": [list(r) for r in seen.references], "closed": seen.closed}}


def main_serve(target: str | None) -> int:
    loaded = load_target(target)
    return serve(loaded.factory, offer=offer_of(loaded))


__all__ = [
    "CAPABILITIES",
    "PROTOCOL",
    "Handshake",
    "Offer",
    "PortProcess",
    "ProcessStore",
    "ProcessTarget",
    "ProtocolError",
    "check_answer",
    "offer_of",
    "parse_command",
    "process_factory",
    "process_target",
    "schema",
    "serve",
]
