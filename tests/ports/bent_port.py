"""A protocol 2 port over the reference store (declaring read_into, observe,
stats and snapshot) whose answers are bent in one way, from request FROM on.

    python bent_port.py BEND [FROM]

Each bend is one way a port can break the protocol (tests/test_protocol_strict.py);
``none`` and ``chatty`` (100 bytes of stderr per request) answer correctly.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from typing import Any

from auxspec.drivers.protocol import Offer, serve
from auxspec.reference.store import ReferenceStore

BEND = sys.argv[1]
FROM = int(sys.argv[2]) if len(sys.argv) > 2 else 3
seen = {"n": 0, "op": ""}


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


# By op: what its ok is replaced with (the request's op decides).
OK_BENDS: dict[str, tuple[str, Any]] = {
    "put-ok": ("put", 0),
    "close-ok": ("close", ""),
    "counts-as-strings": ("stats", "strings"),
    "closed-as-int": ("snapshot", "closed"),
    "contains-as-int": ("contains", 1),
    "len-huge": ("len", 10**30),
    "get-uppercase": ("get", "upper"),
    "get-spaced": ("get", "spaced"),
    "hello-protocol-true": ("hello", {"protocol": True, "capabilities": []}),
}


def bend(answer: dict[str, Any]) -> str | None:
    """The line sent for ``answer``; None: send nothing more (and stall)."""
    op = seen["op"]
    if BEND in OK_BENDS and op == OK_BENDS[BEND][0] and "ok" in answer:
        how = OK_BENDS[BEND][1]
        if how == "strings":
            answer["ok"] = {k: str(v) for k, v in answer["ok"].items()}
        elif how == "closed":
            answer["ok"]["closed"] = int(answer["ok"]["closed"])
        elif how == "upper":
            answer["ok"] = answer["ok"].upper() or "AB"
        elif how == "spaced":
            answer["ok"] = " " + answer["ok"] + " 00"
        else:
            answer["ok"] = how
    elif BEND == "id-true":
        answer["id"] = True
    elif BEND == "extra-field":
        answer["debug"] = "x"
    elif BEND == "deep":
        answer = {"id": answer["id"], "ok": _deep(2000)}
    elif BEND == "deep-20":
        answer = {"id": answer["id"], "ok": _deep(20)}
    elif BEND == "id-huge":
        return '{"id": ' + "9" * 5000 + ', "ok": null}\n'
    elif BEND == "no-newline":
        sys.stdout.write(json.dumps(answer))
        sys.stdout.flush()
        time.sleep(600)
    elif BEND == "close-stdout":
        sys.stdout.flush()
        os.close(1)
        time.sleep(600)
    elif BEND == "exit-keeping-stderr":
        child = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        with open(os.environ["CHILD_PID_FILE"], "w") as file:
            file.write(str(child.pid))
        os._exit(5)
    elif BEND == "huge-answer":  # 100 MB on one line, written from a small buffer
        chunk = b"0" * (1 << 20)
        out = sys.stdout.buffer
        out.write(b'{"id": %d, "ok": "' % answer["id"])
        for _ in range(100):
            out.write(chunk)
        out.write(b'"}\n')
        out.flush()
        return ""
    return json.dumps(answer) + "\n"


class Requests(io.RawIOBase):
    """stdin, noting each request's op and number (and, chatty, writing stderr)."""

    def readline(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        line = sys.stdin.buffer.readline(size)
        if line.strip():
            seen["n"] += 1
            seen["op"] = json.loads(line).get("op", "")
            if BEND == "chatty":
                sys.stderr.write(f"request {seen['n']:>6}: " + "." * 82 + "\n")
                sys.stderr.flush()
        return line


class Answers(io.StringIO):
    def write(self, text: str) -> int:
        if seen["n"] < FROM or BEND in ("none", "chatty"):
            sys.stdout.write(text)
            return len(text)
        line = bend(json.loads(text))
        if line:
            sys.stdout.write(line)
        return len(text)

    def flush(self) -> None:
        sys.stdout.flush()


def main() -> int:
    offer = Offer(frozenset({"read_into", "observe", "stats", "snapshot"}), lambda store: store.snapshot())
    factory = lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n)  # noqa: E731
    return serve(factory, Requests(), Answers(), offer=offer)


if __name__ == "__main__":
    sys.exit(main())
