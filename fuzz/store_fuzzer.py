#!/usr/bin/env python3
"""Differential fuzzing: a store implementation against the spec.

Default: the bundled auxstore.BlockObjectStore under ``strict``, invalid inputs
included, with the model invariant and the store's check_invariants() after
every op. Another target without editing this file:

    AUXSPEC_TARGET=mypkg.store:MyStore ./fuzz/store_fuzzer.py fuzz/corpus/store
    AUXSPEC_TARGET=path/to/port.py AUXSPEC_PROFILE=upstream ./fuzz/store_fuzzer.py
"""

import sys

import atheris

with atheris.instrument_imports(include=["auxstore", "auxspec"]):
    from auxspec.drivers.fuzzing import differential, profile_from_env, target_from_env

TestOneInput = differential(target_from_env(), profile_from_env("strict"))


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
