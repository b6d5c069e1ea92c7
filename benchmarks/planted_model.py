#!/usr/bin/env python3
"""Time to find a bug planted in the model, by the model harness fuzzing:
one of the five bugs of ``tests/test_harness_teeth.py`` patched into
``auxspec.models.sequential``, then the model harness's body fuzzed with
all of ``auxspec`` instrumented (``old``, the harness before 2026-12-07)
or the model only (``new``, as ``fuzz/model_fuzzer.py`` does now).

    .venv/bin/python benchmarks/planted_model.py new evict-pinned SCRATCH -seed=1 -max_total_time=150 \\
        -artifact_prefix=SCRATCH/

SCRATCH: an empty folder (the corpus libFuzzer starts from and writes to).
The run ends at the first finding (a ``crash-`` file): its wall time and
libFuzzer's last ``#N`` are the figures docs/performance.md gives.
"""

import sys
from pathlib import Path

import atheris

MODE, BUG = sys.argv[1], sys.argv[2]
sys.argv = [sys.argv[0], *sys.argv[3:]]
if MODE == "old":
    with atheris.instrument_imports(include=["auxspec"]):
        from auxspec.drivers.fuzzing import libfuzzer_argv, model_contracts
        from auxspec.models import sequential as model
else:
    from auxspec.drivers.fuzzing import instrument, libfuzzer_argv, model_contracts
    from auxspec.models import sequential as model

    instrument(model)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import test_harness_teeth as teeth  # noqa: E402  (the planted bugs, after the model is instrumented)

name, bug = teeth.PLANTED[BUG]
setattr(model, name, bug)
atheris.Setup(libfuzzer_argv(sys.argv), model_contracts)
atheris.Fuzz()
