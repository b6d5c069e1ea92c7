"""The architecture holds: the background transition table is the model's
and is tight, the docs show it as generated, and no module outside the op
table dispatches on op types."""

from __future__ import annotations

import ast
import io
import random
import re
import tokenize
from pathlib import Path

import pytest

from auxspec.checks.contracts import Checked
from auxspec.models import background as bg
from auxspec.models import sequential as model
from auxspec.models.background import OwnerCall, Result, Writer

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "spec" / "auxspec"


@pytest.mark.parametrize("profile", model.PROFILES)
def test_the_docs_show_the_generated_transition_table(profile: str) -> None:
    text = (ROOT / "docs" / "background.md").read_text()
    found = re.search(rf"<!-- transitions:{profile} -->\n(.*?)\n<!-- /transitions:{profile} -->", text, re.S)
    assert found, f"docs/background.md has no transitions:{profile} block"
    assert found.group(1) == bg.table_markdown(profile), "regenerate it with auxspec.models.background.table_markdown"


def _batch(rng: random.Random, strict: bool) -> bg.Batch:
    """Empty, valid, failing (over-release or too big for capacity 1), or invalid."""
    kind = rng.choice(["empty", "valid", "valid", "valid", "pins", "release", "big"] + (["invalid"] if strict else []))
    key = rng.choice("abc")
    if kind == "empty":
        return bg.Batch()
    if kind == "pins":
        return bg.Batch((), (key,), ())
    if kind == "release":
        return bg.Batch((), (), (key,))  # fails unless the key holds a reference
    if kind == "big":
        return bg.Batch(((key, b"x"), (key + "2", b"y")), (key, key + "2"))  # two pinned keys, capacity 1
    if kind == "invalid":
        return bg.Batch(((key, b"too long"),))
    return bg.Batch(((key, b"v"),))


def _walk(profile: str, steps: int, seed: int) -> set[tuple[Writer, OwnerCall, Result]]:
    """Random owner calls and writer steps on the model, each owner step run
    with its contracts checked (which include the table); what was seen."""
    rng = random.Random(seed)
    steps_checked = Checked(bg)
    strict = profile == "strict"
    seen: set[tuple[Writer, OwnerCall, Result]] = set()
    state: bg.BgState | None = None
    for _ in range(steps):
        if state is None or (state.closed and rng.random() < 0.2):
            inner = model.new(1, 1, profile)
            assert isinstance(inner, model.State)
            created = bg.new_background(inner, rng.choice([1, 2]))
            assert isinstance(created, bg.BgState)
            state = created
        writer = bg.writer_of(state)
        choice = rng.random()
        if choice < 0.25 and state.queue:
            state = bg.writer_step(state)
            continue
        if choice < 0.65:
            batch = _batch(rng, strict)
            call = bg.put_call(state, batch)
            alternatives = steps_checked.put(state, batch)
            if not alternatives:
                seen.add((writer, call, Result.WAITS))
                state = bg.writer_step(state)
                continue
            for _, outcome in alternatives:
                seen.add((writer, call, bg.result_of(call, outcome)))
            state = rng.choice(alternatives)[0]
            continue
        name = rng.choice(["read", "flush", "enter", "close"])
        if name == "read":
            state, outcome = steps_checked.get_concatenated(state, (rng.choice("abc"),))
        elif name == "flush":
            state, outcome = steps_checked.flush(state)
        elif name == "enter":
            state, outcome = steps_checked.enter(state)
        else:
            state, outcome = steps_checked.close(state)
        call = {"enter": OwnerCall.ENTER, "close": OwnerCall.CLOSE}.get(name, OwnerCall.WAIT)
        seen.add((writer, call, bg.result_of(call, outcome)))
    return seen


@pytest.mark.parametrize("profile", model.PROFILES)
def test_every_outcome_the_table_allows_is_reached(profile: str) -> None:
    seen = _walk(profile, 60_000, seed=5)
    listed = {(w, c, r) for (w, c), results in bg.TRANSITIONS[profile].items() for r in results}
    assert seen <= listed  # also checked by the contracts, step by step
    missing = sorted((w.value, c.value, r.value) for w, c, r in listed - seen)
    assert not missing, f"the table allows outcomes the model never gives: {missing}"
    print(f"{profile}: {len(seen)} (writer, call, outcome) cells reached, all the table lists")


_OP_TYPES = r"(Put|Get|ReadInto|Close|Flush|Len|Contains|Stats|Enter|Exit)"


def test_no_module_outside_the_op_table_dispatches_on_op_types() -> None:
    pattern = re.compile(rf"isinstance\([^)]*?,\s*\(?\s*(ops\.)?{_OP_TYPES}\b")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(SPEC.rglob("*.py"))
        if path.name != "table.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, "dispatch through auxspec.engine.table.kind_of instead:\n" + "\n".join(offenders)


def code_lines(path: Path) -> int:
    """Lines holding code: not blank, not only a comment, not a docstring."""
    source = path.read_text()
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            is_text = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            if is_text and isinstance(first.value.value, str):  # type: ignore[attr-defined]
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            code.update(range(token.start[0], token.end[0] + 1))
    return len(code - docstrings)


def test_the_semantics_are_shorter_than_the_store() -> None:
    semantics = sum(code_lines(SPEC / "models" / name) for name in ("sequential.py", "background.py"))
    store = sum(code_lines(path) for path in (ROOT / "impl" / "auxstore").glob("*.py"))
    print(f"code lines: the semantics {semantics}, the store {store}")
    assert semantics < store
