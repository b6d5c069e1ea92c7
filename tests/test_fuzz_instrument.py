"""``auxspec.drivers.fuzzing.instrument``: atheris's instrumentation on the
code written in the named modules only (the harnesses' code under test),
every kind of function there included, and nothing imported into them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris", reason="the fuzz extra is not installed")

from auxspec.drivers.fuzzing import instrument

_MODULE = '''
import functools
from os.path import join


def plain(x):
    return 1 if x else 2


@functools.cache
def cached(x):
    return [y for y in range(x) if y % 2]


class Thing:
    def method(self):
        return 3

    @property
    def size(self):
        return 4

    @staticmethod
    def static():
        return 5

    @classmethod
    def made(cls):
        return cls()

    class Inner:
        def deep(self):
            return 6


alias = plain  # the same function twice: instrumented once
'''


def test_instrument_takes_every_function_written_in_the_module_and_nothing_imported(tmp_path: Path) -> None:
    path = tmp_path / "under_test.py"
    path.write_text(_MODULE)
    spec = importlib.util.spec_from_file_location("under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["under_test"] = module
    try:
        spec.loader.exec_module(module)
        join_code = module.join.__code__

        def codes() -> dict[str, object]:
            return {
                "plain": module.plain.__code__,
                "cached": module.cached.__wrapped__.__code__,
                "method": module.Thing.method.__code__,
                "size": module.Thing.size.fget.__code__,
                "static": module.Thing.static.__code__,
                "made": module.Thing.made.__func__.__code__,
                "deep": module.Thing.Inner.deep.__code__,
            }

        before = codes()
        assert instrument(module) == len(before)  # alias is plain: once
        after = codes()
        assert [name for name in before if after[name] is before[name]] == []
        assert module.join.__code__ is join_code  # os.path's, imported: not under test
        # The instrumented code runs as before.
        thing = module.Thing()
        assert (module.plain(0), module.cached(5), thing.method(), thing.size) == (2, [1, 3], 3, 4)
        assert (module.Thing.static(), type(module.Thing.made()), module.Thing.Inner().deep()) == (5, module.Thing, 6)
    finally:
        del sys.modules["under_test"]
