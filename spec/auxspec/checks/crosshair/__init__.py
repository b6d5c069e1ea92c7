"""Check every PEP 316 contract of the spec's models with CrossHair, and say what was proved.

One module per job:

- ``conditions``: collect the conditions (the ``post:`` lines of a model's functions);
- ``inputs``: the input spaces CrossHair explores (``Bounds``, the state creators);
- ``worker``: run one function's conditions in this process, in one exploration;
- ``schedule``: run the workers, two at a time, with CPU boxes and a wall limit;
- ``report``: a line per condition and the run's claim;
- ``cli``: ``python -m auxspec.checks.crosshair`` (``make verify``'s first step).

docs/proofs.md lists each condition with its bounds, outcome and time. The
names below are the ones tests and docs use.
"""

from auxspec.checks.crosshair.conditions import MODEL_PATH, REMOTE_MODEL_PATH, Task, contracted_functions, tasks_for
from auxspec.checks.crosshair.inputs import BOUNDS, TIME_BOXES, UNBOUNDED_SEARCHES, Bounds, install_ordered_dict
from auxspec.checks.crosshair.schedule import GroupResult, TaskResult, check_models, run_tasks

__all__ = [
    "BOUNDS",
    "MODEL_PATH",
    "REMOTE_MODEL_PATH",
    "TIME_BOXES",
    "UNBOUNDED_SEARCHES",
    "Bounds",
    "GroupResult",
    "Task",
    "TaskResult",
    "check_models",
    "contracted_functions",
    "install_ordered_dict",
    "run_tasks",
    "tasks_for",
]
