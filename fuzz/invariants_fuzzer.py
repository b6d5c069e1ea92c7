#!/usr/bin/env python3
"""The invariant checks have teeth: run a decoded trace on auxstore's store
and on the model, break each with corruption ``data[0]``
(auxspec.checks.corruptions), and require ``check_invariants()`` and
``model.violations`` to notice. The differential harnesses trust both checks
after every op; this harness shows they can fail.

Input layout: ``data[0]`` picks the corruptions, the rest is the op alphabet
(see auxspec.drivers.fuzzing.invariant_teeth).
"""

import sys

import atheris

with atheris.instrument_imports(include=["auxstore"]):
    import auxstore  # noqa: F401  (instrumented: its check_invariants() is under test)
from auxspec.drivers.fuzzing import deduplicated, instrument, invariant_teeth, libfuzzer_argv
from auxspec.models import sequential

instrument(sequential)  # the model's violations(), the other check under test


def main() -> None:
    atheris.Setup(libfuzzer_argv(sys.argv), deduplicated(invariant_teeth))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
