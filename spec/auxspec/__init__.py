"""auxspec: the executable specification of auxstore and the tools that verify
any implementation against it."""

from __future__ import annotations

from auxspec.background import ReferenceBackgroundStore
from auxspec.model import Err, Invalid, Kind, Ok, State, UndefinedInput, check, violations
from auxspec.reference import ReferenceStore, observe

__all__ = [
    "Err",
    "Invalid",
    "Kind",
    "Ok",
    "ReferenceBackgroundStore",
    "ReferenceStore",
    "State",
    "UndefinedInput",
    "check",
    "observe",
    "violations",
]
