#!/usr/bin/env python3
"""The trace/vector reader and the port protocol's request reader on
arbitrary input: a TraceError naming the line from the first, status 0 or 3
from ``auxspec serve``, never another exception."""

import sys

import atheris

with atheris.instrument_imports(include=["auxspec"]):
    from auxspec.drivers.fuzzing import deduplicated, libfuzzer_argv, trace_parser


def main() -> None:
    atheris.Setup(libfuzzer_argv(sys.argv), deduplicated(trace_parser))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
