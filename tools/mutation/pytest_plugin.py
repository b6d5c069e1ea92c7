"""A pytest plugin for mutmut's runs (``[tool.mutmut] pytest_add_cli_args``).

Under mutmut every function call goes through a trampoline, so the code runs
several times slower, and slower still on a shared machine: Hypothesis'
200 ms deadline then fails tests for their timing alone, which mutmut would
count against the clean run or as kills. This profile drops the deadline
and the example database and derandomizes Hypothesis, so a mutant's verdict
depends only on the mutant.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("mutation", deadline=None, database=None, derandomize=True)
settings.load_profile("mutation")
