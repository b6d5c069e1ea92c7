"""A protocol 2 port: declares ``read_into`` and ``stats`` only (no
observations, no snapshot), over the reference store, optionally with one
planted bug, and logs the op of every request it gets.

    python v2_port.py [BUG] [LOG]

BUG is ``none``, ``stats`` (a capacity one too large reported) or
``read-into`` (the last byte of a read is not written). LOG, if given, is a
file that gets one line per request: its op.
"""

from __future__ import annotations

import io
import json
import sys
from types import SimpleNamespace
from typing import Any

from auxspec.drivers.protocol import Offer, serve
from auxspec.engine.table import STATS_FIELDS
from auxspec.reference.store import ReferenceStore


class Store:
    """The reference store with the calls of the declared ops only."""

    def __init__(self, bug: str, max_bytes: Any, object_nbytes: Any) -> None:
        self.inner = ReferenceStore(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self.bug = bug

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        self.inner.put(objects, retain_keys=retain_keys, release_keys=release_keys)

    def get_concatenated(self, keys: Any) -> bytes:
        return self.inner.get_concatenated(keys)

    def read_into(self, keys: Any, buffer: Any) -> int:
        written = self.inner.read_into(keys, buffer)
        if self.bug == "read-into" and written:
            buffer[written - 1] = buffer[written - 1] ^ 0xFF
        return written

    def stats(self) -> Any:
        got = self.inner.stats()
        if self.bug == "stats":
            counts = {name: getattr(got, name) for name in STATS_FIELDS}
            counts["capacity"] += 1
            return SimpleNamespace(**counts)
        return got

    def close(self) -> None:
        self.inner.close()


class Logged(io.RawIOBase):
    """stdin, with the op of each request line written to the log."""

    def __init__(self, log: Any) -> None:
        self.log = log

    def readline(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        line = sys.stdin.buffer.readline(size)
        if line.strip() and self.log is not None:
            try:
                self.log.write(f"{json.loads(line).get('op')}\n")
            except ValueError:
                self.log.write("?\n")
            self.log.flush()
        return line


def main() -> int:
    bug = sys.argv[1] if len(sys.argv) > 1 else "none"
    log = open(sys.argv[2], "a", encoding="utf-8") if len(sys.argv) > 2 else None  # noqa: SIM115
    offer = Offer(frozenset({"read_into", "stats"}))
    return serve(lambda m, n: Store(bug, m, n), Logged(log), offer=offer)


if __name__ == "__main__":
    sys.exit(main())
