#!/usr/bin/env python3
"""Differential fuzzing: vLLM's own module against the spec's upstream profile.

vLLM's module is ../shared/upstream/vllm_store.py beside the repository (or
AUXSTORE_UPSTREAM); without it this harness says so and exits 0. It is the
code under test, so it is what is instrumented (imported by its file name);
the spec's engine is not.
"""

import importlib
import os
import shlex
import sys

import atheris

from auxspec.engine.target import upstream_path

PATH = upstream_path()
if PATH is not None:
    sys.path.insert(0, os.path.dirname(PATH))
    with atheris.instrument_imports(include=[PATH.stem]):
        importlib.import_module(PATH.stem)

from auxspec.drivers.fuzzing import differential, libfuzzer_argv  # noqa: E402
from auxspec.engine.target import load_target  # noqa: E402


def main() -> None:
    if PATH is None:
        print("upstream_fuzzer: vLLM's module is not available (../shared/upstream/vllm_store.py); skipping")
        return
    body = differential(load_target(PATH.stem), "upstream", reproduce=f"--target {shlex.quote(str(PATH))}")
    atheris.Setup(libfuzzer_argv(sys.argv), body)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
