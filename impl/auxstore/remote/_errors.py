"""The errors of remote stores beyond the in-process store's own."""

from __future__ import annotations

from auxstore._errors import BlockObjectStoreError


class EngineError(BlockObjectStoreError):
    """The engine failed in a way the ``remote`` profile does not name: it
    cannot be reached, it timed out, it answered with an error other than
    "no room", or it holds a value under one of the store's keys that the
    store did not write (of another length). The engine's own exception is
    the ``__cause__``."""
