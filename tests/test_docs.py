"""Every ```python block in docs/*.md runs, so the docs cannot drift from the code.

A file's blocks run in order in one shared namespace, each block as its own
test (named by file and line). A block whose first line is
``# requires: upstream`` needs vLLM's module (``auxspec.engine.target.load_upstream``)
and is skipped, with that reason, when it is absent. So that skipping is
clean, the other blocks must not use names such blocks define; this is
checked by running each file once without them.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType

import pytest

from auxspec.engine.target import upstream_path

DOCS = Path(__file__).resolve().parents[1] / "docs"
REQUIRES_UPSTREAM = "# requires: upstream"
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # the line of the block's first code line in the .md file
    source: str

    @property
    def needs_upstream(self) -> bool:
        return self.source.lstrip().startswith(REQUIRES_UPSTREAM)

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.line}"

    def compiled(self) -> CodeType:
        # Pad with newlines so tracebacks give the line in the .md file.
        return compile("\n" * (self.line - 1) + self.source, str(self.path), "exec")


def blocks_of(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    return [Block(path, text.count("\n", 0, match.start(1)) + 1, match.group(1)) for match in _FENCE.finditer(text)]


_UPSTREAM_PATH = upstream_path()  # once: it may warn when AUXSTORE_UPSTREAM is wrong


def _upstream_available() -> bool:
    return _UPSTREAM_PATH is not None and _UPSTREAM_PATH.is_file()


DOC_FILES = sorted(DOCS.glob("*.md"))
ALL_BLOCKS = [block for path in DOC_FILES for block in blocks_of(path)]


@dataclass
class _FileRun:
    """The blocks of one file run so far, in order, in one namespace."""

    namespace: dict[str, object] = field(default_factory=dict)
    results: list[str | None] = field(default_factory=list)  # None: passed or skipped


_RUNS: dict[Path, _FileRun] = {}


def _execute(block: Block, namespace: dict[str, object]) -> str | None:
    try:
        exec(block.compiled(), namespace)  # the docs are the project's own code
    except BaseException:
        return traceback.format_exc()
    return None


def _run_through(block: Block) -> str | None:
    """Run the blocks of ``block``'s file up to it (each once, in order); its failure, if any."""
    blocks = blocks_of(block.path)
    run = _RUNS.setdefault(block.path, _FileRun({"__name__": f"docs_{block.path.stem}"}))
    index = [b.line for b in blocks].index(block.line)
    available = _upstream_available()
    while len(run.results) <= index:
        current = blocks[len(run.results)]
        earlier = next((r for r in run.results if r is not None), None)
        if earlier is not None:
            run.results.append("an earlier block of this file failed")
        elif current.needs_upstream and not available:
            run.results.append(None)
        else:
            run.results.append(_execute(current, run.namespace))
    return run.results[index]


def test_the_docs_exist() -> None:
    names = {path.name for path in DOC_FILES}
    assert {"semantics.md", "deviations.md"} <= names, names


# Reference pages whose content is checked another way than by examples.
NOT_EXAMPLES = {
    "performance.md": "figures from the benchmarks; tests/test_bench_smoke.py runs them",
    "protocol.md": "its full exchange is replayed by tests/test_protocol.py",
}


@pytest.mark.parametrize("path", DOC_FILES, ids=[path.name for path in DOC_FILES])
def test_every_doc_has_python_blocks(path: Path) -> None:
    if path.name in NOT_EXAMPLES:
        pytest.skip(f"{path.name}: {NOT_EXAMPLES[path.name]}")
    assert blocks_of(path), f"{path.name} has no ```python block: every doc teaches by executed examples"


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[block.name for block in ALL_BLOCKS])
def test_doc_block_runs(block: Block) -> None:
    if block.needs_upstream and not _upstream_available():
        pytest.skip(f"{block.name} needs vLLM's module (set AUXSTORE_UPSTREAM or add ../shared/upstream)")
    failure = _run_through(block)
    if failure is not None:
        pytest.fail(f"{block.name} failed:\n{failure}", pytrace=False)


@pytest.mark.parametrize("path", DOC_FILES, ids=[path.name for path in DOC_FILES])
def test_doc_runs_without_upstream_blocks(path: Path) -> None:
    # What a reader (or CI) without vLLM's module gets must still be correct.
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}_without_upstream"}
    for block in blocks_of(path):
        if block.needs_upstream:
            continue
        failure = _execute(block, namespace)
        if failure is not None:
            pytest.fail(f"{block.name} fails once the upstream blocks are left out:\n{failure}", pytrace=False)


def test_block_extraction(tmp_path: Path) -> None:
    # The parser itself: only python fences, the code's line numbers, the marker.
    sample = tmp_path / "sample.md"
    sample.write_text(
        "intro\n```python\nx = 1\n```\n```sh\nexit 1\n```\n\n```python\n# requires: upstream\ny = 2\n```\n",
        encoding="utf-8",
    )
    blocks = blocks_of(sample)
    assert [(b.line, b.source, b.needs_upstream) for b in blocks] == [
        (3, "x = 1\n", False),
        (10, "# requires: upstream\ny = 2\n", True),
    ]
    failing = Block(sample, 3, "assert 1 == 2\n")
    report = _execute(failing, {})
    assert report is not None and "AssertionError" in report and "line 3" in report
