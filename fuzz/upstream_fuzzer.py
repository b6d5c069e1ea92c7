#!/usr/bin/env python3
"""Differential fuzzing: vLLM's own module against the spec's upstream profile.

vLLM's module is ../shared/upstream/vllm_store.py beside the repository (or
AUXSTORE_UPSTREAM); without it this harness says so and exits 0.
"""

import sys

import atheris

with atheris.instrument_imports(include=["auxspec"]):
    from auxspec.drivers.fuzzing import differential
    from auxspec.engine.target import load_target, upstream_path


def main() -> None:
    path = upstream_path()
    if path is None or not path.is_file():
        print("upstream_fuzzer: vLLM's module is not available (../shared/upstream/vllm_store.py); skipping")
        return
    atheris.Setup(sys.argv, differential(load_target(str(path)), "upstream"))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
