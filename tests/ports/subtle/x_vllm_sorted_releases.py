"""vLLM patched to sort a long release list (5 keys or more) before
applying it, "for locality"; but the order of releases is the order keys
become terminal, which is the order they move to the most-recent end.

Dimension: upstream profile; many keys (a release list of 5+ keys, capacity >= 5).
Driven through --exec (auxspec serve this file, verify --profile upstream).
Exposed by: store(max_bytes=5, object_nbytes=1); put [e,d,c,b,a] retain
[e,d,c,b,a]; put [] release [e,d,c,b,a]; put [x]; get [a]
(spec: e was least recent and evicted, a stored; port: a evicted).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collections.abc import Iterable
from typing import Any

from _vllm import vllm

DIMENSION = "upstream"
PROFILE = "upstream"
DRIVE = "exec"


class BlockObjectStore(vllm.BlockObjectStore):  # type: ignore[misc,name-defined]
    def _release(self, keys: Iterable[str]) -> list[str]:
        ordered = list(keys)
        if len(ordered) >= 5:
            ordered.sort()
        terminal: list[str] = super()._release(ordered)
        return terminal

    def read_into(self, keys: Any, buffer: Any) -> int:
        """What the port protocol asks of every port: get_concatenated into a buffer."""
        if self._arena is None:
            raise RuntimeError("auxiliary output store is closed")
        view = memoryview(buffer).cast("B")
        wanted = list(keys)
        if any(key not in self._lru for key in wanted):
            raise vllm.BlockObjectStoreError("auxiliary output object does not exist")
        if len(wanted) * self.object_nbytes > view.nbytes:
            raise ValueError("buffer too small")
        data: bytes = self.get_concatenated(wanted)
        view[: len(data)] = data
        return len(data)


KEYS = list("edcba")
SCENARIO = [
    ("new", 5, 1),
    ("put", [(k, b"\x01") for k in KEYS], KEYS, []),
    ("put", [], [], KEYS),
    ("put", [("x", b"\x02")]),
    ("get", ["a"]),
]
