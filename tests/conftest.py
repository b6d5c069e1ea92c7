"""Scheduling only: the longest test files start first.

`make test` runs pytest-xdist with ``--dist loadfile --no-loadscope-reorder``:
each file runs whole on one of the two workers, in the order collected. With
the longest files first, both workers finish at about the same time instead
of one ending on a long file while the other sits idle (xdist's default order,
by number of tests, put the few-test, long-running files last).
"""

from __future__ import annotations

import pytest

# Longest first, as measured on this 2-core machine (each a few minutes); the
# rest keep pytest's order after them.
LONGEST_FIRST = (
    # the long tier (make test-long)
    "test_subtle_ports_flagged.py",  # verify on every subtle port
    "test_depth_ports.py",  # verify on every depth port
    "test_fuzz_corpus.py",  # the corpus and the fault tests under coverage
    "test_crosshair_teeth.py",
    "test_subtle_rewrites_conform.py",
    "test_mutation_sample.py",
    "test_remote_redis.py",  # a live Redis server; its wrong stores judged
    # both tiers
    "test_doc_commands.py",  # every shell command of the docs
    "test_packaging.py",  # builds and installs the wheel and the sdist
    "test_hostile_inputs.py",
    "test_bounded_readers.py",
    "test_protocol_v2.py",
    "test_pytest_plugin.py",
    "test_playground.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order
