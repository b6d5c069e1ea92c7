"""vLLM patched to check each payload's size with ``len()`` before the
put ("fail fast on a wrong-sized block"): ``len()`` counts items, so an
``array('H')`` or a cast ``memoryview`` of exactly ``object_nbytes``
bytes, which vLLM itself copies fine, is refused.

Dimension: upstream profile; payload kinds (buffers with 2-, 4- or 8-byte items).
Exposed by (--profile upstream): store(max_bytes=8, object_nbytes=8);
put [a=array('H', 4 items)] (spec: ok; port: ValueError).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from array import array
from collections.abc import Iterable
from typing import Any

from _vllm import vllm

DIMENSION = "upstream"
PROFILE = "upstream"
DRIVE = "python"


class BlockObjectStore(vllm.BlockObjectStore):  # type: ignore[misc,name-defined]
    def put(self, objects: Iterable[Any], *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        objects = list(objects)
        for obj in objects:
            if len(obj.payload) != self.object_nbytes:
                raise ValueError(f"payload of {obj.key!r} is {len(obj.payload)} long, not {self.object_nbytes}")
        super().put(objects, retain_keys=retain_keys, release_keys=release_keys)


def _halfwords(store: Any) -> bytes:
    store.put([vllm.BlockObject("a", array("H", bytes(range(8))))])
    data: bytes = store.get_concatenated(["a"])
    return data


SCENARIO = [("new", 8, 8), ("do", _halfwords)]
