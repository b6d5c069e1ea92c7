"""A size that is a whole number is taken, whatever its JSON spelling: the
port reads numbers as floats and takes any with no fraction, so
object_nbytes 1E0 and max_bytes 4.0 build a store (the protocol says: not
integers, type). A fraction (2.5) is refused, as it should be. Driven
through --exec.

Dimension: sizes (JSON number forms).
Exposed by (verify --exec 'auxspec serve FILE'): new max_bytes=4.0,
object_nbytes=2 (spec: type; port: a store of two objects).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "sizes"
PROFILE = "strict"
DRIVE = "exec"


def _whole(size: object) -> object:
    return int(size) if isinstance(size, float) and size.is_integer() else size


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=_whole(max_bytes), object_nbytes=_whole(object_nbytes))


SCENARIO = [("new", 4.0, 2)]
