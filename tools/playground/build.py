"""Vendor the playground's runtime into a built docs site, so the page works
offline from any static server: Pyodide (fetched with ``npm pack`` from the
npm registry) and the ``auxstore`` wheel built from this repository, whose
``auxspec.teach.playground`` the page imports.

Where Node is installed (npm brings it), it also vendors a memory snapshot
of Pyodide with the spec imported (``tools/playground/snapshot.js``): the
page starts from it instead of initialising CPython and compiling the
spec's modules, most of a first visit's CPU time (docs/performance.md,
"The playground's first visit"). Without Node the page starts Python itself.

All three are cached under ``build/playground/`` (ignored by git): Pyodide
per version, the wheel per content hash of what goes into it, the snapshot
per both. Nothing of them is committed.

It runs two ways: as a MkDocs hook (mkdocs.yml ``hooks:``), after every
build; and by hand, ``python tools/playground/build.py SITE_DIR``. Where npm
is missing the hook logs that and leaves the runtime out (the page then says
so); the command fails.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "playground"
# 0.27 runs CPython 3.12 (the spec needs 3.11 or later) and its npm package
# holds the interpreter and the whole standard library the spec imports. Of
# 0.27.7, 0.29.3 (3.13) and 314.0.8 (3.14) it starts with the least CPU time
# (Node, 2026-12-06: 2.6 s, 2.7 s, 3.0 s, two runs each, under load).
PYODIDE_VERSION = "0.27.7"
PYODIDE_FILES = ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
# What goes into the wheel (pyproject.toml's wheel target, its readme and force-include).
WHEEL_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "docs/protocol.md", "impl/auxstore", "spec/auxspec")
SITE_FOLDER = "playground"  # docs/playground.md is served from <site>/playground/
SNAPSHOT = "python.snapshot.gz"  # its name in the site (the page's preload hint names it); gzip: 25 MB to 6 MB
SNAPSHOT_MAKER = Path(__file__).with_name("snapshot.js")
MANIFEST = "runtime.json"  # what the page reads to find the wheel

log = logging.getLogger("mkdocs.plugins.playground")


class RuntimeUnavailable(RuntimeError):
    """The runtime cannot be fetched or built here (no npm, no network)."""


def pyodide() -> Path:
    """The folder holding Pyodide's files, fetched with npm once per version."""
    folder = CACHE / f"pyodide-{PYODIDE_VERSION}"
    if all((folder / name).is_file() for name in PYODIDE_FILES):
        return folder
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeUnavailable("npm not found (apt-get install npm); the playground needs Pyodide from npm")
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [npm, "pack", f"pyodide@{PYODIDE_VERSION}", "--pack-destination", scratch, "--silent"],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeUnavailable(f"npm pack pyodide@{PYODIDE_VERSION} failed: {done.stderr.strip()}")
        (tarball,) = Path(scratch).glob("pyodide-*.tgz")
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".pyodide-", dir=CACHE))
        with tarfile.open(tarball) as archive:
            for name in PYODIDE_FILES:
                source = archive.extractfile(f"package/{name}")
                assert source is not None, name
                (partial / name).write_bytes(source.read())
        _settle(partial, folder)
    return folder


def _settle(partial: Path, folder: Path) -> None:
    """Rename a filled ``partial`` folder to ``folder``: whole or not at all, so an interrupted
    fetch is never taken for a cache; when a concurrent build (pytest-xdist) got there first, keep its."""
    try:
        partial.rename(folder)
    except OSError:
        if not folder.is_dir():
            raise
        shutil.rmtree(partial, ignore_errors=True)


def _inputs_hash() -> str:
    digest = hashlib.sha256()
    for top in WHEEL_INPUTS:
        path = ROOT / top
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if "__pycache__" in file.parts:
                continue
            digest.update(str(file.relative_to(ROOT)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def wheel() -> Path:
    """The wheel built from this repository (``python -m build --wheel``), rebuilt when its sources change."""
    folder = CACHE / f"wheel-{_inputs_hash()}"
    built = sorted(folder.glob("auxstore-*.whl"))
    if built:
        return built[0]
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--outdir", scratch, str(ROOT)],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeUnavailable(f"building the wheel failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        (made,) = Path(scratch).glob("auxstore-*.whl")
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".wheel-", dir=CACHE))
        shutil.copy2(made, partial / made.name)
        _settle(partial, folder)
    for old in CACHE.glob("wheel-*"):
        if old != folder:
            shutil.rmtree(old, ignore_errors=True)
    return folder / made.name


def snapshot(runtime: Path, built: Path) -> Path | None:
    """Pyodide's memory snapshot after importing the page's module from ``built``, made with Node
    once per Pyodide version and wheel; None where Node is missing or the snapshot fails (logged)."""
    folder = CACHE / f"snapshot-{PYODIDE_VERSION}-{built.parent.name}"
    if (folder / SNAPSHOT).is_file():
        return folder / SNAPSHOT
    shutil.rmtree(folder, ignore_errors=True)  # left by a build that named the snapshot otherwise
    node = shutil.which("node")
    if node is None:
        log.info("playground: node not found, so no Python snapshot: the page starts Python itself (slower)")
        return None
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".snapshot-", dir=CACHE))
    # -e, not a path: Emscripten records the program's path (argv[1]) in the memory the snapshot holds.
    command = [node, "-e", SNAPSHOT_MAKER.read_text(encoding="utf-8"), "--", "auxstore-playground"]
    done = subprocess.run(
        [*command, str(runtime), str(built), str(partial / "python.snapshot")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={"PATH": os.environ.get("PATH", "")},  # nothing of the build's environment to record
    )
    if done.returncode == 0:
        raw = partial / "python.snapshot"
        (partial / SNAPSHOT).write_bytes(gzip.compress(raw.read_bytes(), compresslevel=6, mtime=0))
        raw.unlink()
    else:
        shutil.rmtree(partial, ignore_errors=True)
        log.info("playground: the Python snapshot failed, the page starts Python itself: %s", done.stderr[-1000:])
        return None
    _settle(partial, folder)
    for old in CACHE.glob("snapshot-*"):
        if old != folder:
            shutil.rmtree(old, ignore_errors=True)
    return folder / SNAPSHOT


def vendor(site: Path) -> Path:
    """Copy Pyodide, the wheel and the snapshot into ``site``'s playground folder; returns that folder."""
    target = site / SITE_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    runtime = pyodide()
    shutil.copytree(runtime, target / "pyodide", dirs_exist_ok=True)
    built = wheel()
    for old in target.glob("auxstore-*.whl"):
        old.unlink()
    shutil.copy2(built, target / built.name)
    made = snapshot(runtime, built)
    if made is not None:
        shutil.copy2(made, target / SNAPSHOT)
    else:
        (target / SNAPSHOT).unlink(missing_ok=True)  # one from an earlier build would not match this wheel
    manifest = {"pyodide": PYODIDE_VERSION, "wheel": built.name, "snapshot": SNAPSHOT if made else None}
    (target / MANIFEST).write_text(json.dumps(manifest) + "\n", encoding="utf-8")
    return target


def on_post_build(config: Any, **_: Any) -> None:
    """MkDocs hook: vendor the runtime into the site just built."""
    try:
        where = vendor(Path(config["site_dir"]))
    except RuntimeUnavailable as why:
        # Not a warning: `mkdocs build --strict` must pass where npm is absent; the page says what is missing.
        log.info("playground runtime left out: %s", why)
        return
    log.info("playground runtime (Pyodide %s and the wheel) vendored into %s", PYODIDE_VERSION, where)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tools/playground/build.py SITE_DIR", file=sys.stderr)
        return 2
    try:
        where = vendor(Path(argv[0]))
    except RuntimeUnavailable as why:
        print(f"playground: {why}", file=sys.stderr)
        return 1
    print(f"playground runtime vendored into {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
