"""Mooncake Store's result codes as typed errors.

The client's calls return an int: 0, or a negative code of Mooncake's
``ErrorCode`` enum (mooncake-store/include/types.h). The names below are that
enum's for the codes stable across releases; any other code is still raised,
named ``UNKNOWN``.
"""

from __future__ import annotations

from auxstore._errors import CapacityError
from auxstore.remote._errors import EngineError

NO_AVAILABLE_HANDLE = -200  # no room in any segment: eviction has not caught up yet
OBJECT_HAS_LEASE = -706  # a remove within the lease a read granted

CODE_NAMES: dict[int, str] = {
    -1: "INTERNAL_ERROR",
    -10: "BUFFER_OVERFLOW",
    -100: "SHARD_INDEX_OUT_OF_RANGE",
    -101: "SEGMENT_NOT_FOUND",
    -102: "SEGMENT_ALREADY_EXISTS",
    -103: "CLIENT_NOT_FOUND",
    NO_AVAILABLE_HANDLE: "NO_AVAILABLE_HANDLE",
    -300: "INVALID_VERSION",
    -400: "INVALID_KEY",
    -500: "WRITE_FAIL",
    -600: "INVALID_PARAMS",
    -601: "ILLEGAL_CLIENT",
    -700: "INVALID_WRITE",
    -701: "INVALID_READ",
    -702: "INVALID_REPLICA",
    -703: "REPLICA_IS_NOT_READY",
    -704: "OBJECT_NOT_FOUND",
    -705: "OBJECT_ALREADY_EXISTS",
    OBJECT_HAS_LEASE: "OBJECT_HAS_LEASE",
    -707: "LEASE_EXPIRED",
    -708: "OBJECT_HAS_REPLICATION_TASK",
    -709: "OBJECT_NO_REPLICATION_TASK",
    -710: "REPLICA_NOT_FOUND",
    -711: "REPLICA_ALREADY_EXISTS",
    -712: "REPLICA_IS_GONE",
    -800: "TRANSFER_FAIL",
    -900: "RPC_FAIL",
}


def code_name(code: int) -> str:
    """Mooncake's name for result ``code``."""
    return CODE_NAMES.get(code, "UNKNOWN")


class MooncakeError(EngineError):
    """Mooncake answered a call with a result code the profile does not name
    (``code``, and ``name`` from Mooncake's ``ErrorCode``)."""

    def __init__(self, call: str, code: int) -> None:
        self.code = code
        self.name = code_name(code)
        super().__init__(f"Mooncake {call} failed: {code} ({self.name})")


class MooncakeCapacityError(CapacityError):
    """Mooncake refused a put for room (``NO_AVAILABLE_HANDLE``): its
    eviction runs behind the puts, so the same put may succeed a moment
    later. Earlier chunks of the batch may be published (``published``
    counts their objects)."""

    def __init__(self, call: str, code: int, published: int) -> None:
        self.code = code
        self.name = code_name(code)
        self.published = published
        super().__init__(
            f"Mooncake {call} refused for room: {code} ({self.name}); eviction may be catching up, "
            f"retry the put (objects of earlier chunks may be published: {published})"
        )


def raise_for(call: str, code: object, published: int = 0) -> None:
    """Nothing for 0; the typed error of any other result."""
    if code == 0:
        return
    if type(code) is not int:
        raise EngineError(f"Mooncake {call} returned {code!r}, not a result code")
    if code == NO_AVAILABLE_HANDLE:
        raise MooncakeCapacityError(call, code, published)
    raise MooncakeError(call, code)
