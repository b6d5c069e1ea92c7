"""The port protocol (docs/protocol.md): JSON Lines over a process's stdin and
stdout, requests in the op alphabet of the trace files.

``ProcessTarget`` drives a port process; its stores raise the exceptions the
binding gives each error kind, so ``ops.apply`` classifies them back and a
port in any language is compared exactly like a Python one. ``serve`` is the
port side for any Python target.
"""

from __future__ import annotations

import contextlib
import json
import select
import shlex
import subprocess
import sys
from collections.abc import Callable
from typing import IO, Any

from auxspec.engine.compare import apply
from auxspec.engine.ops import Close, Get, Op, Put, ReadInto
from auxspec.engine.target import PortBroken, load_target
from auxspec.engine.traces import TraceError, op_from_json, op_to_json, outcome_to_json
from auxspec.models.sequential import Kind
from auxspec.reference import binding
from auxspec.reference.store import Snapshot as StoreSnapshot

KINDS = {kind.value for kind in Kind}


class ProtocolError(PortBroken):
    """The port process broke the protocol (exited, hung, printed garbage)."""


class _Broken(Exception):
    """Raised inside ``PortProcess.request``: what went wrong, before it is
    told apart as at the start or mid-run."""


class PortProcess:
    """One running port; requests go out one at a time and wait for their answer."""

    def __init__(self, command: str, op_timeout: float = 5.0, earlier_answers: int = 0) -> None:
        self.command = command
        self.op_timeout = op_timeout
        self.next_id = 1
        # Requests answered, by this process and the earlier ones of its run:
        # once any was, a break is a counterexample, not a port that cannot run.
        self.answered = earlier_answers
        try:
            self.process = subprocess.Popen(
                shlex.split(command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
        except OSError as error:
            raise ProtocolError(f"cannot start {command!r}: {error}", at_start=earlier_answers == 0) from None

    def alive(self) -> bool:
        return self.process.poll() is None

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to ``body``; a ``ProtocolError`` (and the process killed,
        so it is never read half-way again) when it breaks the protocol."""
        try:
            reply = self._request(body)
        except _Broken as broken:
            self.kill()
            raise ProtocolError(str(broken), at_start=self.answered == 0) from None
        self.answered += 1
        return reply

    def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        line = json.dumps({"id": request_id, **body})
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise _Broken(f"port exited before request {line}{self._stderr_tail()}") from None
        ready, _, _ = select.select([self.process.stdout], [], [], self.op_timeout)
        if not ready:
            self.kill()
            raise _Broken(f"no answer within {self.op_timeout:g} s to request {line}")
        answer = self.process.stdout.readline()
        if not answer:
            code = self.process.wait(timeout=self.op_timeout)
            raise _Broken(f"port exited with status {code} on request {line}{self._stderr_tail()}")
        try:
            reply = json.loads(answer)
        except ValueError:  # JSONDecodeError, or an integer longer than int() takes
            raise _Broken(f"answer to request {line} is not JSON: {answer.strip()[:200]!r}") from None
        if not isinstance(reply, dict) or reply.get("id") != request_id:
            raise _Broken(f"answer to request {line} has the wrong id: {answer.strip()[:200]!r}")
        if ("ok" in reply) == ("error" in reply):
            raise _Broken(f'answer to request {line} needs exactly one of "ok" and "error": {answer.strip()}')
        if "error" in reply and reply["error"] not in KINDS:
            raise _Broken(f"answer to request {line} has an unknown error kind: {answer.strip()[:200]!r}")
        return reply

    def _stderr_tail(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        tail = self.process.stderr.read()[-500:].strip()
        return f"; its stderr ends: {tail}" if tail else ""

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def close(self) -> None:
        if self.process.stdin:
            with contextlib.suppress(OSError):  # the port may be gone already
                self.process.stdin.close()
        try:
            self.process.wait(timeout=self.op_timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def _raise_for(reply: dict[str, Any], op: str, line: str) -> None:
    if "error" not in reply:
        return
    kind = reply["error"]  # a kind of KINDS: PortProcess.request checked it
    # The binding's exception for the kind: ops.apply classifies it back. The
    # message is optional in the protocol; a Python store must give one.
    message = str(reply.get("message") or f"{kind} (the port gave no message)")
    raise binding.exception_for(Kind(kind), "strict", message)


def _hex(reply: dict[str, Any], op: str) -> bytes:
    value = reply["ok"]
    if not isinstance(value, str):
        raise ProtocolError(f"answer to {op} must be hex, got {value!r}")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise ProtocolError(f"answer to {op} is not hex: {value!r}") from None


class ProcessStore:
    """A store inside a port process, with the Python store API."""

    def __init__(self, port: PortProcess, max_bytes: Any, object_nbytes: Any) -> None:
        self.port = port
        reply = port.request({"op": "new", "max_bytes": max_bytes, "object_nbytes": object_nbytes})
        _raise_for(reply, "new", str(reply))

    def _call(self, op: Op) -> dict[str, Any]:
        reply = self.port.request(op_to_json(op))
        _raise_for(reply, op.name, str(reply))
        return reply

    def put(self, objects: list[Any], *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        items = tuple((obj.key, obj.payload) for obj in objects)
        self._call(Put(items, tuple(retain_keys), tuple(release_keys)))

    def get_concatenated(self, keys: list[Any]) -> bytes:
        return _hex(self._call(Get(tuple(keys))), "get")

    def read_into(self, keys: list[Any], buffer: bytes | bytearray) -> int:
        readonly = isinstance(buffer, bytes)
        data = _hex(self._call(ReadInto(tuple(keys), len(buffer), readonly)), "read_into")
        if isinstance(buffer, bytes) or len(data) > len(buffer):  # a read-only buffer must have been refused
            raise ProtocolError(f"read_into answered {len(data)} bytes for a {len(buffer)}-byte buffer")
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._call(Close())

    def snapshot(self) -> StoreSnapshot | None:
        reply = self.port.request({"op": "snapshot"})
        if reply.get("error") == "unsupported":
            return None
        _raise_for(reply, "snapshot", str(reply))
        value = reply["ok"]
        try:
            entries = tuple((str(k), bytes.fromhex(p)) for k, p in value["entries"])
            references = tuple((str(k), int(n)) for k, n in value["references"])
            return StoreSnapshot(entries, references, bool(value["closed"]))
        except (TypeError, ValueError, KeyError) as error:
            raise ProtocolError(f"snapshot answer is malformed ({error}): {reply}") from None


class Ports:
    """The port process behind a run: kept across traces, started anew for
    the next store after one broke."""

    def __init__(self, command: str, op_timeout: float = 5.0) -> None:
        self.command, self.op_timeout = command, op_timeout
        self.port = PortProcess(command, op_timeout)

    def store(self, max_bytes: Any, object_nbytes: Any) -> ProcessStore:
        if not self.port.alive():
            self.port = PortProcess(self.command, self.op_timeout, self.port.answered)
        return ProcessStore(self.port, max_bytes, object_nbytes)

    def close(self) -> None:
        self.port.close()


def process_factory(command: str, op_timeout: float = 5.0) -> tuple[Callable[[Any, Any], ProcessStore], Ports]:
    """A store factory over the port process of ``command``, and the ports to close."""
    ports = Ports(command, op_timeout)
    return ports.store, ports


# ------------------------------------------------------------------- serving


def serve(
    factory: Callable[[Any, Any], Any],
    stdin: IO[str] = sys.stdin,
    stdout: IO[str] = sys.stdout,
    stderr: IO[str] | None = None,
) -> int:
    """Answer protocol requests on ``stdin`` with stores from ``factory``.

    Returns 0 at the end of input; 3 on a request that is not the protocol
    (reported on ``stderr``, by default the process's), as docs/protocol.md
    says a port should.
    """
    store: Any = None
    for number, line in enumerate(stdin, start=1):
        if not line.strip():
            continue
        try:
            try:
                request = json.loads(line)
            except ValueError as error:  # JSONDecodeError, or an integer longer than int() takes
                raise TraceError(f"request line {number}: not JSON ({error})") from None
            if not isinstance(request, dict) or not isinstance(request.get("id"), int):
                raise TraceError(f"request line {number}: needs an integer id")
            reply = _answer(request, store, factory, f"request line {number}")
        except TraceError as error:
            print(f"auxspec serve: {error}", file=stderr or sys.stderr)
            return 3
        if "store" in reply:
            store = reply.pop("store")
        stdout.write(json.dumps({"id": request["id"], **reply}) + "\n")
        stdout.flush()
    return 0


def _answer(request: dict[str, Any], store: Any, factory: Callable[[Any, Any], Any], where: str) -> dict[str, Any]:
    op = request.get("op")
    if op == "new":
        if store is not None:
            with contextlib.suppress(Exception):  # a fresh store replaces it, whatever its state
                store.close()
        try:
            return {"ok": None, "store": factory(request.get("max_bytes"), request.get("object_nbytes"))}
        except Exception as error:
            kind = binding.classify("new", error)
            if kind is None:
                raise
            return {"error": kind.value, "message": str(error), "store": None}
    if store is None:
        raise TraceError(f"{where}: {op!r} before any new")
    if op == "snapshot":
        snap = getattr(store, "snapshot", None)
        if snap is None:
            return {"error": "unsupported"}
        seen = snap()
        entries = [[key, payload.hex()] for key, payload in seen.entries]
        return {"ok": {"entries": entries, "references": [list(r) for r in seen.references], "closed": seen.closed}}
    outcome = apply(store, op_from_json(request, where))
    return outcome_to_json(outcome)


def main_serve(target: str | None) -> int:
    return serve(load_target(target).factory)
