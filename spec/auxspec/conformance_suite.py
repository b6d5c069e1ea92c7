"""The tests ``pytest --auxspec-target TARGET`` runs (auxspec.pytest_plugin
adds this file to the session): ``auxspec.pytest.conformance`` with the
command line's options."""

from __future__ import annotations

from auxspec.pytest import conformance
from auxspec.pytest_plugin import OPTIONS

if OPTIONS:
    conformance(
        OPTIONS["target"],
        profile=OPTIONS["profile"],
        background=OPTIONS["background"],
        max_examples=OPTIONS["max_examples"],
    )
