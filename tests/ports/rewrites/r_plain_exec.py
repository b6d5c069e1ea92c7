"""The plain strict store (tests/ports/subtle/_plain.py) driven through
--exec (auxspec serve this file): the port protocol path of the buggy
exec ports, without a bug.

Snapshot vs spec: identical.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from _plain import PlainStore as BlockObjectStore

PROFILE = "strict"
DRIVE = "exec"
SNAPSHOT = "identical"
__all__ = ["BlockObjectStore"]
