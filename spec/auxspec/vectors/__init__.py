"""Conformance vectors: write the catalog, check the files, measure coverage.

Coverage is of the model's steps (the bodies of the functions in ``models/sequential.py``
above its contracts section, which only CrossHair runs; the invariant is
tested on broken states elsewhere), with branches, measured by replaying every vector
on the spec. ``raise UndefinedInput`` lines are left out: they are the inputs
no valid vector can hold.
"""

from __future__ import annotations

import ast
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from auxspec.engine import traces
from auxspec.engine.expect import expected_new, initial_state, spec_steps
from auxspec.engine.ops import Op
from auxspec.models import sequential as model
from auxspec.models.sequential import Err, Outcome
from auxspec.vectors import catalog

BUNDLED = Path(__file__).parent  # the vector files live beside this module
CONTRACTS_MARKER = "# -------------------------------------------------------------------- contracts"


# Not steps: the invariant (only broken states reach its failing branches; see
# tests/test_model.py) and queries.
NOT_STEPS = ("violations", "check", "stored_keys", "references")


def step_bodies(source: str) -> list[tuple[int, int]]:
    """Line ranges of the bodies of the model's step functions: module-level
    functions above the contracts section, less the invariant, less docstrings."""
    lines = source.splitlines()
    end = next(i for i, line in enumerate(lines, 1) if line == CONTRACTS_MARKER)
    ranges = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.lineno < end and node.name not in NOT_STEPS:
            body = node.body
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring
            ranges.append((body[0].lineno, node.end_lineno or body[-1].lineno))
    return ranges


@dataclass(frozen=True)
class Coverage:
    lines: tuple[int, int]  # (covered, total)
    branches: tuple[int, int]
    missing: tuple[str, ...]  # "line" or "line->line", for the report

    @property
    def percent(self) -> float:
        covered = self.lines[0] + self.branches[0]
        total = self.lines[1] + self.branches[1]
        return 100.0 * covered / total if total else 100.0


def generate(folder: Path = BUNDLED) -> list[Path]:
    """Write every catalog vector as ``<folder>/<profile>/<name>.jsonl``."""
    written = []
    for name, trace in catalog.catalog().items():
        path = folder / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        traces.write(traces.vector_from_trace(trace, name, catalog.description(name)), path)
        written.append(path)
    return written


def stale(vectors: list[traces.VectorFile]) -> list[str]:
    """The vectors whose recorded expectations the spec no longer produces
    (each file read one op at a time)."""
    bad = []
    for vector in vectors:
        if expected_new(vector.head()) != vector.header.expect_new:
            bad.append(f"{vector.name}: building the store expects {vector.header.expect_new}, the spec differs")
            continue
        for number, (fresh, recorded) in enumerate(_replayed(vector), start=1):
            if fresh != recorded:
                bad.append(f"{vector.name}: op {number} expects {recorded}, the spec says {fresh}")
                break
    return bad


def _replayed(vector: traces.VectorFile) -> Iterator[tuple[Outcome, Outcome]]:
    """Per op of ``vector``, the spec's outcome and the recorded one, the ops
    streamed from the file into the spec's walk."""
    head = vector.head()
    built = initial_state(head)
    if isinstance(built, Err):
        return
    recorded: list[Outcome] = []

    def ops() -> Iterator[Op]:
        for op, outcome in vector.pairs():
            recorded.append(outcome)
            yield op

    for _, _, _, fresh in spec_steps(head, built, 1, ops()):
        yield fresh, recorded.pop()


def measure(vectors: list[traces.VectorFile]) -> Coverage:
    """Branch coverage of the model's steps by replaying ``vectors`` on the spec."""
    import coverage

    source = Path(model.__file__).resolve()
    ranges = step_bodies(source.read_text())
    cov = coverage.Coverage(branch=True, include=[str(source)], data_file=None)
    cov.exclude("raise UndefinedInput")
    cov.start()
    try:
        for vector in vectors:
            expected_new(vector.head())
            for _ in _replayed(vector):
                pass
    finally:
        cov.stop()
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "coverage.json"
        cov.json_report(outfile=str(report), include=[str(source)])
        data = next(iter(json.loads(report.read_text())["files"].values()))

    def in_steps(line: int) -> bool:
        return any(first <= line <= last for first, last in ranges)

    executed = [n for n in data["executed_lines"] if in_steps(n)]
    missing_lines = [n for n in data["missing_lines"] if in_steps(n)]
    hit = [b for b in data["executed_branches"] if in_steps(b[0])]
    missed = [b for b in data["missing_branches"] if in_steps(b[0])]
    return Coverage(
        (len(executed), len(executed) + len(missing_lines)),
        (len(hit), len(hit) + len(missed)),
        tuple([str(n) for n in missing_lines] + [f"{a}->{b}" for a, b in missed]),
    )
