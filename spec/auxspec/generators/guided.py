"""Coverage-guided inputs for a Python target: the target's own branch
coverage steers which codec inputs are mutated next.

``Arcs`` records the line-to-line arcs (the branches taken) that the
target's own code runs, with ``sys.settrace`` restricted to the target's
files (not the spec's, the standard library's or installed packages');
``CoverageArcs`` counts the same with coverage.py's C tracer, about twice as
fast, and ``target_arcs`` picks it when coverage.py is installed. Either
traces only inside the calls wrapped by its ``around`` (a driver wraps its
calls into the target): a thread being traced runs every line slower, the
spec's too, so the compare's own work is left untraced. ``Corpus`` keeps every input that
reached an arc no earlier input reached, and makes the next input by
mutating one of them (libFuzzer's kinds of mutation: flip, set to a boundary
value, insert, erase, copy a run, splice two inputs). An input is bytes for
``engine.codec.decode``, and a driver judges it with the one compare; this
module knows neither.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path
from random import Random
from types import CodeType, FrameType
from typing import Any, ParamSpec, TypeVar

Tracer = Callable[[FrameType, str, Any], Any]
P = ParamSpec("P")
R = TypeVar("R")

_SPEC = str(Path(__file__).resolve().parents[1])  # the spec's own code (auxspec/) is not the target
_LIBRARIES = ("stdlib", "platstdlib", "purelib", "platlib")  # the standard library and installed packages
_NOT_TARGET = tuple({_SPEC, *(str(Path(sysconfig.get_paths()[name]).resolve()) for name in _LIBRARIES)})


def _is_target_file(filename: str) -> bool:
    if filename.startswith("<"):
        return False
    try:
        resolved = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return not resolved.startswith(_NOT_TARGET)


class _Recorder:
    """What both recorders share: ``around``, and the tracer it switches on."""

    def __init__(self) -> None:
        self._tracer: Any = None  # what ``around`` traces with: set while recording (``with recorder:``)

    def around(self, call: Callable[P, R]) -> Callable[P, R]:
        """``call``, traced while it runs when inside ``with recorder:``."""

        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            tracer = self._tracer
            if tracer is None:  # not recording: whatever traces the thread (a measurement's) is left alone
                return call(*args, **kwargs)
            sys.settrace(tracer)
            try:
                return call(*args, **kwargs)
            finally:
                sys.settrace(None)

        return traced


class Arcs(_Recorder):
    """The arcs (code, line from, line to) the target's code has run in the
    calls wrapped by ``around``; while it is active (``with arcs:``),
    ``fresh`` counts the arcs not seen before."""

    def __init__(self, wanted: Callable[[str], bool] = _is_target_file) -> None:
        super().__init__()
        self.seen: set[tuple[CodeType, int, int]] = set()
        self.fresh = 0
        self._wanted = wanted
        self._files: dict[str, bool] = {}
        self._before: Any = None

    def __enter__(self) -> Arcs:
        self._before = sys.gettrace()
        sys.settrace(None)  # the calls wrapped by ``around`` are traced, the rest of the thread is not
        self._tracer = self._call
        return self

    def __exit__(self, *exc: object) -> None:
        self._tracer = None
        sys.settrace(self._before)  # whatever traced before (coverage's, say) goes on

    @property
    def count(self) -> int:
        """The arcs seen so far."""
        return len(self.seen)

    def _call(self, frame: FrameType, event: str, arg: Any) -> Tracer | None:
        code = frame.f_code
        wanted = self._files.get(code.co_filename)
        if wanted is None:
            wanted = self._files[code.co_filename] = self._wanted(code.co_filename)
        if not wanted:
            return None
        seen = self.seen
        last = -code.co_firstlineno  # the frame's entry

        def local(frame: FrameType, event: str, arg: Any) -> Tracer:
            nonlocal last
            if event == "line" or event == "return":
                line = frame.f_lineno if event == "line" else -1
                arc = (code, last, line)
                if arc not in seen:
                    seen.add(arc)
                    self.fresh += 1
                last = line
            return local

        return local


class CoverageArcs(_Recorder):
    """``Arcs``' job done by coverage.py's C tracer, about twice as fast on
    the target's lines (the Python tracer is a Python call per line): the
    arcs of the files coverage.py would measure, less the spec's own. Only
    ``fresh`` and ``count`` are kept: how many arcs, not which."""

    def __init__(self, coverage_module: Any) -> None:
        super().__init__()
        self._coverage = coverage_module.Coverage(
            data_file=None, branch=True, config_file=False, omit=[_SPEC + "/*"], messages=False
        )
        self.fresh = 0
        self.count = 0

    def __enter__(self) -> CoverageArcs:
        # A coverage.py measurement already running (pytest-cov's) is paused,
        # and resumed by stop(); a tracer of another kind (a debugger's) is not.
        self._coverage.start()
        # The C tracer start() installed: ``around`` installs it again around
        # each call (coverage.py supports sys.settrace(sys.gettrace())), and
        # between the calls the thread runs untraced. Threads that start now
        # are traced whole, as before (coverage.py's threading hook).
        self._tracer = sys.gettrace()
        sys.settrace(None)
        return self

    def __exit__(self, *exc: object) -> None:
        self._tracer = None
        self._coverage.stop()
        # The collector's sets, one per file, before any report is made of them.
        now = sum(map(len, self._coverage._collector.data.values()))
        self.fresh += now - self.count
        self.count = now


def target_arcs() -> CoverageArcs | Arcs:
    """The fastest arc recorder this environment has: coverage.py's C tracer
    when coverage.py (a dependency of the ``verify`` extra) is installed and
    records as ``CoverageArcs`` reads it, else ``Arcs``. (Under a debugger's
    tracer, which ``CoverageArcs`` does not resume, set
    ``AUXSPEC_PYTHON_TRACER=1``.)"""
    if os.environ.get("AUXSPEC_PYTHON_TRACER"):
        return Arcs()
    try:
        import coverage

        arcs = CoverageArcs(coverage)
        probe: dict[str, Any] = {}
        # A branch in a file of no package (it need not exist): one the recorder must see.
        exec(compile("def probe(x):\n    if x:\n        return 1\n    return 2\n", _PROBE_FILE, "exec"), probe)
        with arcs:
            arcs.around(probe["probe"])(1)
    except Exception:  # no coverage.py, or one whose collector is laid out otherwise
        return Arcs()
    return arcs if arcs.count > 0 else Arcs()


_PROBE_FILE = str(Path(tempfile.gettempdir()) / "auxspec-arcs-probe" / "probe.py")


_BOUNDARY = (0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 191, 192, 239, 240, 250, 253, 254, 255)


class Corpus:
    """Inputs that reached new arcs, and the mutations that make the next one."""

    def __init__(self, rng: Random, most: int = 4096) -> None:
        self.rng = rng
        self.inputs: list[bytes] = []
        self.most = most  # the longest input made

    def add(self, data: bytes) -> None:
        self.inputs.append(data)

    def next(self) -> bytes:
        rng = self.rng
        data = bytearray(rng.choice(self.inputs))
        for _ in range(1 + min(int(rng.expovariate(0.7)), 8)):
            self._mutate(data)
        return bytes(data[: self.most])

    def _mutate(self, data: bytearray) -> None:
        rng = self.rng
        kind = rng.randrange(7)
        if not data:
            data.append(rng.randrange(256))
            return
        at = rng.randrange(len(data))
        if kind == 0:
            data[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            data[at] = rng.choice(_BOUNDARY)
        elif kind == 2:
            data[at] = (data[at] + rng.choice((-2, -1, 1, 2))) % 256
        elif kind == 3:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif kind == 4 and len(data) > 1:
            del data[at : at + rng.randrange(1, 9)]
        elif kind == 5:  # copy a run elsewhere: the same ops again
            size = rng.randrange(1, 33)
            run = data[at : at + size]
            where = rng.randrange(len(data) + 1)
            data[where:where] = run
        else:  # splice with another input
            other = rng.choice(self.inputs)
            cut = rng.randrange(len(other) + 1)
            data[at:] = other[cut:]
