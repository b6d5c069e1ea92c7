"""What a plain ``pip install auxstore`` gives: the store with no third-party
module, and an ``auxspec`` command that names the extra it lacks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from auxspec import cli


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


def test_the_store_imports_nothing_third_party() -> None:
    done = _python(
        "import sys, auxstore\n"
        "store = auxstore.BlockObjectStore(max_bytes=4, object_nbytes=2)\n"
        "store.put([auxstore.BlockObject('a', b'xx')])\n"
        "assert store.get_concatenated(['a']) == b'xx'\n"
        "store.read_into(['a'], bytearray(2))\n"
        # numpy (the fast extra) is imported only by the first large scattered read_into
        "third = ('hypothesis', 'rich', 'coverage', 'atheris', 'crosshair', 'numpy')\n"
        "print(sorted(m for m in third if m in sys.modules))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_command_names_the_extra_it_lacks() -> None:
    # As without the extra: the import of hypothesis fails.
    done = _python("import sys; sys.modules['hypothesis'] = None\nfrom auxspec.command import main\nsys.exit(main())")
    assert done.returncode == 2
    assert "pip install 'auxstore[verify]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_version(capsys: object) -> None:
    try:
        cli.main(["--version"])
    except SystemExit as exit_:
        assert exit_.code == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert out.startswith("auxspec ") and out.strip() != "auxspec"


# ------------------------------------------------------------ the built package
# CI builds the sdist and, from it, the wheel (python -m build), installs each
# in a fresh venv with only its verify extra, and runs what a port author
# would: `auxspec vectors --check`, verify of the C port from the sdist's
# sources, and the three-line pytest conformance file from the wheel. About
# two to four minutes, most of it pip.

ROOT = Path(__file__).resolve().parents[1]
OWN_ERRORS_PORT = ROOT / "tests" / "ports" / "own_errors" / "myport.py"
THREE_LINES = (
    "from auxspec.pytest import conformance\n"
    "from myport import Closed, Full, NoSuchKey, NotPinned\n"
    'conformance("myport:Store", errors={Full: "capacity", NoSuchKey: "missing", NotPinned: "unreferenced", '
    'Closed: "closed"}, max_examples=30)\n'
)


def _run(
    command: list[str], cwd: Path | None = None, timeout: float = 600, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_XDIST_WORKER")}
    environment.update(env)
    return subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout, check=False
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("build", reason="python -m build comes with the dev extra")
    out = tmp_path_factory.mktemp("dist")
    # The wheel is built from the sdist: what the sdist lacks, the wheel lacks.
    _ok(_run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], timeout=600))
    (sdist,) = out.glob("auxstore-*.tar.gz")
    (wheel,) = out.glob("auxstore-*.whl")
    return {"sdist": sdist, "wheel": wheel}


def _venv(where: Path, requirement: str) -> Path:
    _ok(_run([sys.executable, "-m", "venv", str(where)]))
    _ok(_run([str(where / "bin" / "python"), "-m", "pip", "install", "-q", requirement, "pytest"], timeout=900))
    return where / "bin"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_sdist_holds_what_building_and_testing_need(dist: dict[str, Path]) -> None:
    with tarfile.open(dist["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for needed in (
        "LICENSE",
        "README.md",
        "Makefile",
        "pyproject.toml",
        "ports/c/auxport.c",
        "ports/c/Makefile",
        "docs/protocol.md",
        "docs/verifying-a-port.md",
        "tests/ports/own_errors/myport.py",
        "spec/auxspec/schemas/verify-report.schema.json",
    ):
        assert needed in names, f"the sdist lacks {needed}"
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        inside = set(wheel.namelist())
    assert "auxspec/schemas/verify-report.schema.json" in inside
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in inside), sorted(inside)[-8:]
    entry_points = next(name for name in inside if name.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        assert "[pytest11]\nauxspec = auxspec.pytest_plugin" in wheel.read(entry_points).decode()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_from_the_sdist_the_vectors_check_and_the_c_port_verifies(
    dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    for tool in ("gcc", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"building the C port needs {tool}, which is not installed")
    work = tmp_path_factory.mktemp("sdist")
    with tarfile.open(dist["sdist"]) as sdist:
        sdist.extractall(work, filter="data")
    (source,) = work.glob("auxstore-*")
    bin_ = _venv(work / "venv", f"{source}[verify]")
    out = _ok(_run([str(bin_ / "auxspec"), "vectors", "--check", str(source / "spec" / "auxspec" / "vectors")]))
    assert "model coverage 100.0%" in out
    _ok(_run(["make", "-C", str(source / "ports" / "c"), f"BUILD={work}"]))
    verified = _ok(
        _run(
            [str(bin_ / "auxspec"), "verify", "--exec", str(work / "auxport"), "--max-time", "10", "--seed", "1"],
            cwd=work,
        )
    )
    assert "conforms:" in verified


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_from_the_wheel_three_lines_of_pytest_run_conformance_and_catch_a_planted_bug(
    dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    work = tmp_path_factory.mktemp("wheel")
    bin_ = _venv(work / "venv", f"auxstore[verify] @ {dist['wheel'].as_uri()}")
    assert _ok(_run([str(bin_ / "auxspec"), "--version"])).strip() == f"auxspec {_version_of(dist['wheel'])}"
    assert "model coverage 100.0%" in _ok(_run([str(bin_ / "auxspec"), "vectors", "--check"], cwd=work))
    # The port: its own exception classes, no snapshot(); the test file: three lines.
    project = work / "project"
    project.mkdir()
    shutil.copy(OWN_ERRORS_PORT, project / "myport.py")
    (project / "test_myport.py").write_text(THREE_LINES)
    assert len(THREE_LINES.splitlines()) == 3
    pytest_ = [str(bin_ / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    passed = _run(pytest_, cwd=project, PYTHONPATH=str(project), MYPORT_BUG="0")
    assert passed.returncode == 0, passed.stdout
    assert re.search(r"\b2\d passed\b", passed.stdout), passed.stdout  # the usable vectors and the machine
    failed = _run([*pytest_, "-k", "vector"], cwd=project, PYTHONPATH=str(project), MYPORT_BUG="1")
    assert failed.returncode == 1, failed.stdout
    assert "myport:Store fails vector" in failed.stdout
    assert re.search(r"divergence at step \d+ of \d+:\n  store\(.*\)\n(.*\n)*>> +\d+\. put\(", failed.stdout)
    assert re.search(r"\n  \* outcome ", failed.stdout)


def _version_of(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def test_no_doc_points_outside_the_repository() -> None:
    """Every relative link of the docs, README and port pages names a file in
    the repository, and none cites the design brief's file, which is not in it."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "ports").rglob("*.md"))]
    pages += sorted((ROOT / "tests" / "ports").rglob("README.md"))
    wrong = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        if "DESIGN.md" in text:
            wrong.append(f"{page.relative_to(ROOT)} cites DESIGN.md")
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"^[a-z]+:", link):
                continue
            target = (page.parent / link).resolve()
            if not target.is_relative_to(ROOT) or not target.exists():
                wrong.append(f"{page.relative_to(ROOT)} links to {link}")
    assert wrong == []
