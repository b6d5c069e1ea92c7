"""vLLM patched to file keys by their first 32 characters ("a block hash
is unique in its first 32 hex digits"), so keys that share a 32-character
prefix are one key.

Dimension: upstream profile; long keys sharing long prefixes.
Exposed by (--profile upstream): store(max_bytes=2, object_nbytes=1);
put [h*32 + "1" = 01]; get [h*32 + "2"] (spec: missing; port: 01).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collections.abc import Iterable, Iterator
from typing import Any

from _vllm import vllm

DIMENSION = "upstream"
PROFILE = "upstream"
DRIVE = "python"


def _cut(keys: Any) -> Any:
    # A one-pass iterator stays one (vLLM reads it once and moves nothing).
    if isinstance(keys, Iterator):
        return (k[:32] for k in keys)
    return [k[:32] for k in keys]


class BlockObjectStore(vllm.BlockObjectStore):  # type: ignore[misc,name-defined]
    def put(self, objects: Iterable[Any], *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        filed = (vllm.BlockObject(obj.key[:32], obj.payload) for obj in objects)
        super().put(filed, retain_keys=_cut(retain_keys), release_keys=_cut(release_keys))

    def get_concatenated(self, keys: Any) -> bytes:
        data: bytes = super().get_concatenated(_cut(keys))
        return data


SCENARIO = [("new", 2, 1), ("put", [("f" * 32 + "1", b"\x01")]), ("get", ["f" * 32 + "2"])]
