"""The plain strict store every subtle strict port is built on
(tests/ports/subtle/_plain.py), as it is: an independent implementation with
a bytearray arena, LIFO slot reuse and an OrderedDict index.

Snapshot vs spec: identical.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from _plain import PlainStore as BlockObjectStore

PROFILE = "strict"
DRIVE = "python"
SNAPSHOT = "identical"
__all__ = ["BlockObjectStore"]
