"""The ``auxspec`` console script.

``pip install auxstore`` installs the store alone; the spec's commands need
the ``verify`` extra (Hypothesis, rich, coverage). Run without it, the
command says which extra to install instead of a traceback.
"""

from __future__ import annotations

import io
import sys

# The third-party modules the commands import, and the extra that brings each.
EXTRA_OF = {"hypothesis": "verify", "rich": "verify", "coverage": "verify", "crosshair": "crosshair"}


def main() -> int:
    try:
        # Imported here, not above: a missing extra must be reported, not raised.
        from auxspec.cli import main as run
    except ModuleNotFoundError as missing:
        top = (missing.name or "").partition(".")[0]
        if top not in EXTRA_OF:
            raise
        print(f"auxspec: needs {top}: pip install 'auxstore[{EXTRA_OF[top]}]'", file=sys.stderr)
        return 2
    # The last guard of the output: what a command failed to escape (a key
    # with a lone surrogate) is written as a backslash escape, never a traceback.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    return run()


if __name__ == "__main__":
    sys.exit(main())
