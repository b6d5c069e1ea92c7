#!/usr/bin/env python3
"""The background writer against its spec: the input decides the owner calls
(the store harness's alphabet) and where the writer stands before each of
them (the inner store is gated, so the writer only moves when told).

Default: auxstore's BackgroundBlockObjectStore under ``strict``, with injected
inner faults; AUXSPEC_PROFILE=upstream drives vLLM's instead (when its module
is available). Input layout: see auxspec.generators.background.background_scenario.
"""

import sys

import atheris

with atheris.instrument_imports(include=["auxstore"]):
    import auxstore  # noqa: F401  (instrumented: its background store is under test)
from auxspec.drivers.fuzzing import background_harness, deduplicated, instrument, libfuzzer_argv, profile_from_env
from auxspec.models import background

instrument(background)  # the background model: which of the writer's states an input reaches


def main() -> None:
    atheris.Setup(libfuzzer_argv(sys.argv), deduplicated(background_harness(profile_from_env("strict"))))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
