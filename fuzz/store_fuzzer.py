#!/usr/bin/env python3
"""Differential fuzzing: a store implementation against the spec.

Default: the bundled auxstore.BlockObjectStore under ``strict``, invalid inputs
included, in the engine's cheap mode (outcomes after every op; the whole
state, the model invariant and the store's check_invariants() every 16 ops
and at the end; the precise replay naming the first diverging op on any
difference). Another target without editing this file:

    AUXSPEC_TARGET=mypkg.store:MyStore ./fuzz/store_fuzzer.py fuzz/corpus/store
    AUXSPEC_TARGET=path/to/port.py AUXSPEC_PROFILE=upstream ./fuzz/store_fuzzer.py
    ./fuzz/store_fuzzer.py --exec ports/c/auxport fuzz/corpus/store   # a port process (docs/protocol.md)
    AUXSPEC_EXEC=ports/c/auxport ./fuzz/store_fuzzer.py fuzz/corpus/store   # the same

Coverage feedback comes from the code under test only (docs/fuzzing.md,
"What is instrumented"): the target's module, imported first under
instrumentation (a target named by path is imported by its file name), not
the spec's engine and decoder. With --exec the code under test is another
process, so the feedback is the model's and the decoder's.
"""

import importlib
import os
import sys

import atheris

EXEC_ENV = "AUXSPEC_EXEC"  # --exec CMD as the fork-mode workers get it


def _exec_command(argv: list[str]) -> tuple[str | None, list[str]]:
    """``--exec CMD`` (or ``--exec=CMD``) taken out of ``argv``, else
    ``AUXSPEC_EXEC``. libFuzzer's fork, merge and minimize modes re-run the
    harness with its own flags only: the command goes to them through the
    environment, or they would fuzz the bundled store instead of the port."""
    rest, command, args = [argv[0]], None, iter(argv[1:])
    for arg in args:
        if arg == "--exec":
            command = next(args, None)
        elif arg.startswith("--exec="):
            command = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    if command is None:
        command = os.environ.get(EXEC_ENV) or None
    elif os.environ.get(EXEC_ENV, command) != command:
        sys.exit(f"store_fuzzer: --exec {command!r} and {EXEC_ENV}={os.environ[EXEC_ENV]!r} disagree: give one")
    else:
        os.environ[EXEC_ENV] = command
    return command, rest


COMMAND, ARGV = _exec_command(sys.argv)
NAMED = os.environ.get("AUXSPEC_TARGET")

if COMMAND is None:
    MODULE, _, CLASS = (NAMED or "auxstore").partition(":")
    if MODULE.endswith(".py"):  # imported by file name, so that the import hook instruments it
        sys.path.insert(0, os.path.dirname(os.path.abspath(MODULE)))
        MODULE = os.path.basename(MODULE)[:-3]
    elif os.getcwd() not in sys.path:  # a package of the caller's, as `python -m` would find it
        sys.path.append(os.getcwd())
    with atheris.instrument_imports(include=[MODULE.split(".")[0]]):
        importlib.import_module(MODULE)
    from auxspec.drivers.fuzzing import differential, libfuzzer_argv, profile_from_env, target_args_from_env
    from auxspec.engine.target import load_target

    TARGET = load_target(f"{MODULE}:{CLASS}" if CLASS else MODULE)
    TestOneInput = differential(TARGET, profile_from_env("strict"), reproduce=target_args_from_env())
else:
    from auxspec.drivers.fuzzing import exec_differential, instrument, libfuzzer_argv, profile_from_env
    from auxspec.engine import codec
    from auxspec.models import sequential

    instrument(sequential, codec)  # what the inputs reach of the spec: the port is another process
    TestOneInput = exec_differential(COMMAND, profile_from_env("strict"))


def main() -> None:
    atheris.Setup(libfuzzer_argv(ARGV), TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
