"""What a plain ``pip install auxstore`` gives: the store with no third-party
module, and an ``auxspec`` command that names the extra it lacks."""

from __future__ import annotations

import subprocess
import sys

from auxspec import cli


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


def test_the_store_imports_nothing_third_party() -> None:
    done = _python(
        "import sys, auxstore\n"
        "store = auxstore.BlockObjectStore(max_bytes=4, object_nbytes=2)\n"
        "store.put([auxstore.BlockObject('a', b'xx')])\n"
        "assert store.get_concatenated(['a']) == b'xx'\n"
        "third = sorted(m for m in ('hypothesis', 'rich', 'coverage', 'atheris', 'crosshair') if m in sys.modules)\n"
        "print(third)\n"
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
