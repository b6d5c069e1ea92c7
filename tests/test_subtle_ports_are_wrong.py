"""Each subtle buggy port in tests/ports/subtle is really wrong: the call
sequence of its docstring (its ``SCENARIO``) gives an outcome the spec's
reference does not, while the correct store the port was derived from
(auxstore under ``strict``, vLLM's module under ``upstream``) agrees with
the reference on every step of the same sequence.

Whether ``auxspec verify`` finds these bugs is measured elsewhere
(tests/ports/subtle/measure.py, check_subtle_ports.py); this only shows
there is a bug to find.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import auxstore
from auxspec import ReferenceBackgroundStore, ReferenceStore
from auxspec.engine.target import load_module_from_path, upstream_path

SUBTLE = Path(__file__).resolve().parent / "ports" / "subtle"
sys.path.insert(0, str(SUBTLE))
from _scenario import Gated, Outcome, first_difference, play  # noqa: E402

PORTS = sorted(p for p in SUBTLE.glob("[a-z]*_*.py") if p.name not in ("check_subtle_ports.py",))
DIMENSIONS = (
    "larger stores",
    "many keys",
    "pin counts",
    "long histories",
    "payloads",
    "buffers",
    "keys",
    "background full queue",
    "upstream",
)


def _needs_vllm(path: Path) -> bool:
    return "from _vllm import" in path.read_text()


def _load(path: Path) -> ModuleType:
    if _needs_vllm(path) and upstream_path() is None:
        pytest.skip("a vLLM-based port: vLLM's module (../shared/upstream or $AUXSTORE_UPSTREAM) is not available")
    return load_module_from_path(path)


def _vllm() -> ModuleType:
    path = upstream_path()
    if path is None:
        pytest.skip("vLLM's module is not available")
    return load_module_from_path(path)


def _outcomes(scenario: list[Any], sequential: Any, background: Any) -> list[Outcome]:
    def build(max_bytes: int, nbytes: int, pending: int | None) -> tuple[Any, Gated | None]:
        store = sequential(max_bytes=max_bytes, object_nbytes=nbytes)
        if pending is None:
            return store, None
        gate = Gated(store)
        return background(gate, max_pending_batches=pending), gate

    return play(scenario, build)


def _reference(scenario: list[Any], profile: str) -> list[Outcome]:
    def build(max_bytes: int, nbytes: int, pending: int | None) -> tuple[Any, Gated | None]:
        params = {"max_bytes": max_bytes, "object_nbytes": nbytes}
        if pending is None:
            return ReferenceStore(**params, profile=profile), None
        return ReferenceBackgroundStore(params, max_pending_batches=pending, profile=profile), None

    return play(scenario, build)


def test_there_are_enough_ports_over_every_dimension() -> None:
    runnable = [p for p in PORTS if upstream_path() or not _needs_vllm(p)]
    modules = [load_module_from_path(p) for p in runnable]
    print(f"{len(modules)} ports load")
    dimension_of = {p: re.search(r'^DIMENSION = "([^"]+)"', p.read_text(), re.M) for p in PORTS}
    assert len(PORTS) >= 32
    for dimension in DIMENSIONS:  # counted over the files
        count = sum(1 for found in dimension_of.values() if found and found.group(1) == dimension)
        assert count >= 3, (dimension, count)
    texts = [p.read_text() for p in PORTS]
    assert sum(1 for t in texts if 'DRIVE = "exec"' in t) >= 4
    assert sum(1 for t in texts if 'PROFILE = "upstream"' in t) >= 3
    assert sum(1 for t in texts if "BackgroundBlockObjectStore" in t) >= 3
    assert all(hasattr(m, "BlockObjectStore") for m in modules)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", PORTS, ids=[p.stem for p in PORTS])
def test_the_docstring_sequence_tells_the_port_from_the_spec(path: Path) -> None:
    port = _load(path)
    scenario = list(port.SCENARIO)
    assert port.__doc__ and "Exposed by" in port.__doc__ and "Dimension" in port.__doc__
    if port.PROFILE == "upstream":
        vllm = _vllm()
        correct = (vllm.BlockObjectStore, vllm.BackgroundBlockObjectStore)
    else:
        correct = (auxstore.BlockObjectStore, auxstore.BackgroundBlockObjectStore)
    expected = _reference(scenario, port.PROFILE)
    good = _outcomes(scenario, *correct)
    assert first_difference(expected, good) is None, f"the scenario itself is off: {expected} vs {good}"
    actual = _outcomes(scenario, port.BlockObjectStore, getattr(port, "BackgroundBlockObjectStore", None))
    step = first_difference(expected, actual)
    assert step is not None, f"{path.stem} agrees with the spec on its own scenario: {actual}"
    print(f"{path.stem}: step {step} {scenario[step][0]}: spec {expected[step]!r:.60}, port {actual[step]!r:.60}")


EXEC_PORTS = [p for p in PORTS if 'DRIVE = "exec"' in p.read_text()]
_KINDS = {
    "capacity": "store",
    "missing": "store",
    "unreferenced": "unreferenced",
    "closed": "closed",
    "type": "type",
    "payload": "value",
    "buffer": "value",
    "config": "value",
}


def _over_protocol(path: Path, scenario: list[Any]) -> list[Outcome]:
    """The scenario as port-protocol requests to ``auxspec serve PATH``."""
    requests: list[dict[str, Any]] = []
    for step in scenario:
        op: dict[str, Any]
        if step[0] == "new":
            op = {"op": "new", "max_bytes": step[1], "object_nbytes": step[2]}
        elif step[0] == "put":
            op = {
                "op": "put",
                "objects": [[k, p.hex()] for k, p in step[1]],
                "retain": list(step[2]) if len(step) > 2 else [],
                "release": list(step[3]) if len(step) > 3 else [],
            }
        elif step[0] == "get":
            op = {"op": "get", "keys": list(step[1])}
        elif step[0] == "close":
            op = {"op": "close"}
        else:
            raise AssertionError(f"an exec port's scenario has a step the protocol lacks: {step!r}")
        requests.append({"id": len(requests) + 1, **op})
    done = subprocess.run(
        [sys.executable, "-m", "auxspec.cli", "serve", str(path)],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    outcomes: list[Outcome] = []
    for request, line in zip(requests, done.stdout.splitlines(), strict=True):
        answer = json.loads(line)
        assert answer["id"] == request["id"]
        if "error" in answer:
            outcomes.append(("err", _KINDS[answer["error"]]))
        elif request["op"] == "get":
            outcomes.append(("ok", bytes.fromhex(answer["ok"])))
        else:
            outcomes.append(("ok", answer["ok"]))
    return outcomes


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", EXEC_PORTS, ids=[p.stem for p in EXEC_PORTS])
def test_an_exec_port_shows_its_bug_over_the_protocol(path: Path) -> None:
    port = _load(path)
    scenario = list(port.SCENARIO)
    expected = _reference(scenario, port.PROFILE)
    served = _over_protocol(path, scenario)
    assert served == _outcomes(scenario, port.BlockObjectStore, None)
    assert first_difference(expected, served) is not None
