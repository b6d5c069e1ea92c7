#!/usr/bin/env python3
"""The model's own contracts, by fuzzing: every step of a decoded trace is
held to its PEP 316 pre- and postconditions (what CrossHair proves over
bounded symbolic inputs, here on concrete traces of any length), under both
profiles, with invalid values that ``upstream`` must refuse as undefined.

Input layout: ``data[0]`` picks the profile, the rest is the op alphabet
(see auxspec.drivers.fuzzing.model_contracts).
"""

import sys

import atheris

from auxspec.drivers.fuzzing import deduplicated, instrument, libfuzzer_argv, model_contracts
from auxspec.models import sequential

instrument(sequential)  # the code under test: the model's steps (not the decoder, not the contract checker)


def main() -> None:
    atheris.Setup(libfuzzer_argv(sys.argv), deduplicated(model_contracts))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
