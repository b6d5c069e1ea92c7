"""A ``str`` payload is taken as its Latin-1 bytes ("text payloads are
convenient in tests"), though the spec refuses ``str`` (TypeError, no
change): a caller's slip is stored instead of reported.

Dimension: payload kinds (a str, which the spec refuses).
Exposed by: store(max_bytes=2, object_nbytes=2); put [a="ab"]
(spec: type; port: ok).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import Any

from _plain import PlainStore, listed

from auxstore import BlockObject

DIMENSION = "payload kinds"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _batch(self, objects: Any) -> list[tuple[str, Any]]:
        objects = [
            BlockObject(obj.key, obj.payload.encode("latin-1"))  # type: ignore[arg-type]
            if isinstance(getattr(obj, "payload", None), str)
            else obj
            for obj in listed(objects, "objects")
        ]
        return super()._batch(objects)


SCENARIO = [("new", 2, 2), ("put", [("a", "ab")]), ("get", ["a"])]
