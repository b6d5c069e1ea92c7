"""The docs site: `mkdocs build --strict` passes, every page is in the nav (so
test_docs.py runs every example on the site), the tour's pictures are what
the timeline code draws from its traces, the exercises' vectors are the
spec's, and the `auxspec explain` / `auxspec play` commands the pages show run."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from _site import mkdocs_build
from auxspec import cli
from auxspec.teach import tour

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
VECTORS = Path(cli.__file__).with_name("vectors")
_SH = re.compile(r"^```sh[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _nav_pages(items: Any) -> list[str]:
    if isinstance(items, str):
        return [items]
    if isinstance(items, list):
        return [page for item in items for page in _nav_pages(item)]
    if isinstance(items, dict):
        return [page for value in items.values() for page in _nav_pages(value)]
    return []


def _config() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    config = _config()
    assert config["docs_dir"] == "docs" and config["theme"]["name"] == "material"
    pages = _nav_pages(config["nav"])
    assert len(pages) == len(set(pages))
    # test_docs.py runs the python blocks of docs/*.md: the site is exactly those pages.
    assert sorted(pages) == sorted(path.name for path in DOCS.glob("*.md"))


@pytest.mark.timeout(300)
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = mkdocs_build(site)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    tour_page = (site / "tour" / "index.html").read_text(encoding="utf-8")
    pictures = re.findall(r'<img alt="[^"]*" src="([^"]+\.svg)"', tour_page)
    assert len(pictures) == 7
    for picture in pictures:
        assert (site / "tour" / picture).read_text(encoding="utf-8").startswith("<svg")
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    # mkdocstrings rendered the docstrings, not just the headings
    assert "BlockObjectStore" in api and "Pins first, then the batch, then terminal moves" in api
    for page in _nav_pages(_config()["nav"]):
        built = site / ("index.html" if page == "index.md" else f"{page[:-3]}/index.html")
        assert built.is_file(), page


def test_the_tour_pictures_are_drawn_from_its_traces() -> None:
    expected = tour.files()
    committed = {path.name: path.read_text(encoding="utf-8") for path in (DOCS / "tour").iterdir()}
    stale = sorted(name for name in expected if committed.get(name) != expected[name])
    assert not stale, f"regenerate with: python -m auxspec.teach.tour docs/tour ({stale})"
    assert sorted(committed) == sorted(expected)
    text = (DOCS / "tour.md").read_text(encoding="utf-8")
    for name in expected:
        if name.endswith(".svg"):
            assert f"](tour/{name})" in text, f"tour.md does not show {name}"


def test_the_tour_svgs_show_what_the_lessons_teach() -> None:
    files = tour.files()
    recency = files["recency.svg"]
    assert re.search(r'class="slot evicted[^"]*" data-key="b"', recency)
    assert 'class="slot unstored" data-key="x"' in files["pins-before-data.svg"]
    assert re.search(r'class="slot terminal[^"]*" data-key="a"', files["terminal-moves.svg"])
    assert "error: capacity" in files["capacity-strict.svg"] and "error: capacity" in files["capacity-upstream.svg"]
    assert files["background.svg"].count('class="slot queued') >= 3
    assert "raises BlockObjectStoreError" in files["background.svg"]


def test_the_exercise_vectors_are_the_specs() -> None:
    copies = sorted((DOCS / "exercises").glob("*/*.jsonl"))
    assert len(copies) >= 20
    for copy in copies:
        original = VECTORS / "strict" / copy.name
        assert copy.read_bytes() == original.read_bytes(), f"{copy} differs from {original}"
    folders = sorted(path.name for path in (DOCS / "exercises").iterdir())
    text = (DOCS / "exercises.md").read_text(encoding="utf-8")
    for folder in folders:
        assert f"docs/exercises/{folder}/" in text, folder


def _shown_commands() -> list[tuple[str, list[str]]]:
    """The `auxspec explain` and `auxspec play` lines of the pages' sh blocks
    whose input exists in the repository (the rest name the reader's own files)."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        for block in _SH.findall(page.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():  # a command continued with a backslash is one line
                words = shlex.split(line, comments=True)
                if words[:2] == ["auxspec", "play"] or (
                    words[:2] == ["auxspec", "explain"] and (ROOT / words[2]).is_file()
                ):
                    found.append((page.name, words[1:]))
    return found


SHOWN = _shown_commands()


def test_the_pages_show_explain_and_play() -> None:
    shown = {(page, words[0]) for page, words in SHOWN}
    assert {("tour.md", "explain"), ("tour.md", "play")} <= shown


@pytest.mark.parametrize("page,words", SHOWN, ids=[f"{p}:{' '.join(w)}" for p, w in SHOWN])
def test_shown_command_runs(page: str, words: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = [str(tmp_path / Path(w).name) if i and words[i - 1] == "--html" else w for i, w in enumerate(words)]
    if words[0] == "play":
        import io

        monkeypatch.setattr(sys, "stdin", io.StringIO("put a b --retain a\nput c d\nquit\n"))
    assert cli.main(args) == 0, f"{page}: auxspec {' '.join(words)}"
    if "--html" in words:
        assert (tmp_path / Path(words[words.index("--html") + 1]).name).read_text().startswith("<!DOCTYPE html>")
