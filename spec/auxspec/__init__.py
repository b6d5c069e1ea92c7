"""auxspec: the executable specification of auxstore and the tools that verify
any implementation against it.

The layout is the design (docs/architecture.md): ``models`` (the pure
semantics), ``reference`` (the model behind the store's API), ``engine`` (the
op table, codec, trace format, targets and the one differential check),
``generators``, ``checks`` (of the spec itself), ``vectors`` and ``drivers``
(verify, the Hypothesis machine, the background driver, fuzzing, the port
protocol), then ``cli``.
"""

from __future__ import annotations

from auxspec.models.sequential import Err, Invalid, Kind, Ok, State, UndefinedInput, check, violations
from auxspec.reference.background import ReferenceBackgroundStore
from auxspec.reference.store import ReferenceStore, observe

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
