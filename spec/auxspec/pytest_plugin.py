"""The pytest plugin (the ``pytest11`` entry point ``auxspec``):
``pytest --auxspec-target mypkg.store:MyStore`` runs the conformance tests
of ``auxspec.pytest.conformance`` with no test file.

Loaded by every pytest run where auxstore is installed, so it imports only
pytest until asked for a target (a plain ``pip install auxstore`` has no
Hypothesis).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SUITE = Path(__file__).with_name("conformance_suite.py")
# The options of this session, read by conformance_suite.py when pytest imports it.
OPTIONS: dict[str, Any] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("auxspec", "conformance of a store port to the auxstore spec")
    group.addoption(
        "--auxspec-target",
        metavar="TARGET",
        help="run the conformance tests on TARGET: module:Class, a module exposing BlockObjectStore, or a .py file",
    )
    group.addoption("--auxspec-profile", choices=("strict", "upstream"), default="strict", help="default: strict")
    group.addoption(
        "--auxspec-background", metavar="CLASS", help="module:Class of the port's background store, if it has one"
    )
    group.addoption(
        "--auxspec-examples", type=int, default=100, help="examples of the differential state machine (default 100)"
    )


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption("auxspec_target", None)
    if not target:
        return
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise pytest.UsageError(
            "--auxspec-target needs the verify extra: pip install 'auxstore[verify]'"
        ) from None
    OPTIONS.update(
        target=target,
        profile=config.getoption("auxspec_profile"),
        background=config.getoption("auxspec_background"),
        max_examples=config.getoption("auxspec_examples"),
    )
    # The suite runs beside any paths given; alone when none were.
    given = config.args_source == pytest.Config.ArgsSource.ARGS
    config.args[:] = [*config.args, str(SUITE)] if given else [str(SUITE)]
