"""Collect the conditions CrossHair checks: the ``post:`` lines of a model's
top-level functions, each a ``Task``.

Reading the docstrings with ``ast`` (not importing the model) lets a copy of
the model with a planted bug be collected the same way as the model itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "models"
MODEL_PATH = MODELS / "sequential.py"
# The remote profile's model (docs/remote.md): its own states, built by make_remote_state.
REMOTE_MODEL_PATH = MODELS / "remote.py"


# ``post:``, or ``post[names]:`` for a function that changes the arguments named.
_POST = re.compile(r"post(?:\[[^\]]*\])?:(.*)")


@dataclass(frozen=True)
class Task:
    """One postcondition of one function in one model file."""

    group: str  # tasks of a group stop together under fail-fast
    model: Path
    function: str
    index: int  # position among the function's ``post:`` lines
    line: int
    source: str


def contracted_functions(model: Path) -> dict[str, list[tuple[int, str]]]:
    """Top-level functions of ``model`` with their ``post:`` (or ``post[...]:``) lines (line, text)."""
    tree = ast.parse(model.read_text(), filename=str(model))
    found: dict[str, list[tuple[int, str]]] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        doc = ast.get_docstring(node, clean=False)
        if doc is None:
            continue
        first = node.body[0].lineno  # the docstring's first line
        posts = [
            (first + offset, match.group(1).strip())
            for offset, text in enumerate(doc.splitlines())
            if (match := _POST.match(text.strip()))
        ]
        if posts:
            found[node.name] = posts
    return found


def tasks_for(group: str, model: Path, functions: Sequence[str] | None = None) -> list[Task]:
    contracted = contracted_functions(model)
    names = list(contracted) if functions is None else list(functions)
    missing = [name for name in names if name not in contracted]
    if missing:
        raise ValueError(f"{model}: no postconditions on {', '.join(missing)}")
    return [
        Task(group, model, name, index, line, source)
        for name in names
        for index, (line, source) in enumerate(contracted[name])
    ]


def parse_target(target: str) -> tuple[Path, list[str] | None]:
    """``FILE``, ``FUNCTION`` (of the sequential model) or ``FILE:FUNCTION[,FUNCTION]``."""
    if target.endswith(".py"):
        return Path(target), None
    if ":" in target:
        path, names = target.rsplit(":", 1)
        return Path(path), names.split(",")
    return MODEL_PATH, target.split(",")


def breadth(source: str) -> int:
    """How many names a postcondition relates: the broadest say the most
    about a result, so under fail-fast they go first."""
    return len({node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)})


def round_robin(lists: Sequence[Sequence[Task]]) -> Iterable[list[Task]]:
    """The first task of each list, then the second of each, and so on."""
    depth = max((len(items) for items in lists), default=0)
    for i in range(depth):
        yield [items[i] for items in lists if i < len(items)]
