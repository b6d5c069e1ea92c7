"""Each correct rewrite in tests/ports/rewrites agrees with the spec's
reference on a few thousand random ops: the same outcome at every step, and
the same state in its observable form (the order of unpinned keys, the set
of pinned entries, the counts; not the order of pinned keys nor slots).

The op generator here is this test's own, written independently of the
search in ``auxspec.engine.codec``.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from auxspec import ReferenceBackgroundStore, ReferenceStore
from auxspec.engine.target import load_module_from_path, observe_vllm
from auxstore import BlockObject

PORTS = Path(__file__).resolve().parent / "ports"
sys.path.insert(0, str(PORTS / "subtle"))
from _scenario import kind  # noqa: E402

REWRITES = sorted((PORTS / "rewrites").glob("r_*.py"))
TRACES = 120


def _load(path: Path) -> ModuleType:
    if "vllm" in path.stem:
        from auxspec.engine.target import upstream_path

        if upstream_path() is None:
            pytest.skip("vLLM's module is not available")
    return load_module_from_path(path)


Canonical = tuple[Any, ...]


def canonical(snapshot: Any) -> Canonical:
    """The observable form: unpinned entries in order, pinned entries as a set."""
    entries, references, closed = snapshot
    refs = {key: count for key, count in references}
    entries = [(key, bytes(payload)) for key, payload in entries]
    unpinned = tuple(e for e in entries if e[0] not in refs)
    pinned = tuple(sorted(e for e in entries if e[0] in refs))
    return unpinned, pinned, tuple(sorted(refs.items())), bool(closed)


def _ops(rng: random.Random, reads_into: bool) -> tuple[int, int, list[tuple[Any, ...]]]:
    capacity = rng.choice([1, 2, 3, 5, 8, 9])
    nbytes = rng.choice([1, 2, 3, 7])
    max_bytes = capacity * nbytes + rng.randrange(nbytes)
    pool = [f"k{i}" for i in range(rng.randint(1, 2 * capacity + 3))]
    pool += rng.sample(["\u00e9", "e\u0301", "b" * 40, "b" * 39 + "c", " k0"], 2)
    pinned: list[str] = []
    ops: list[tuple[Any, ...]] = []
    for _ in range(rng.randint(1, 60)):
        roll = rng.random()
        if roll < 0.55:
            objects = [(rng.choice(pool), bytes([rng.randrange(256)]) * nbytes) for _ in range(rng.randint(0, 4))]
            retains = [rng.choice(pool) for _ in range(rng.choice([0, 0, 1, 2, 4]))]
            pinned += retains
            releases = [
                rng.choice(pinned) if pinned and rng.random() < 0.85 else rng.choice(pool)
                for _ in range(rng.choice([0, 0, 1, 2, 3]))
            ]
            ops.append(("put", objects, retains, releases))
        elif roll < 0.85:
            ops.append(("get", [rng.choice(pool) for _ in range(rng.randint(0, 3))]))
        elif roll < 0.97 and reads_into:
            keys = [rng.choice(pool) for _ in range(rng.randint(0, 3))]
            ops.append(("read_into", keys, max(0, len(keys) * nbytes + rng.choice([-1, 0, 0, 5]))))
        else:
            ops.append(("close",))
    return max_bytes, nbytes, ops


def _step(store: Any, op: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        if op[0] == "put":
            objects = [BlockObject(k, p) for k, p in op[1]]
            return ("ok", store.put(objects, retain_keys=op[2], release_keys=op[3]))
        if op[0] == "get":
            return ("ok", store.get_concatenated(op[1]))
        if op[0] == "read_into":
            buffer = bytearray(op[2])
            return ("ok", (store.read_into(op[1], buffer), bytes(buffer)))
        return ("ok", store.close())
    except Exception as error:
        return ("err", kind(error))


def _compare(
    make_port: Callable[[int, int], Any],
    make_ref: Callable[[int, int], Any],
    observe: Callable[[Any], Any] | None,
    reads_into: bool,
    seed: int,
    compared: Callable[[tuple[Any, ...]], bool] = lambda op: True,
) -> int:
    rng = random.Random(seed)
    done = 0
    for trace in range(TRACES):
        max_bytes, nbytes, ops = _ops(rng, reads_into)
        port, ref = make_port(max_bytes, nbytes), make_ref(max_bytes, nbytes)
        try:
            for index, op in enumerate(ops):
                want, got = _step(ref, op), _step(port, op)
                where = f"trace {trace} (max_bytes={max_bytes}, object_nbytes={nbytes}) op {index} {op!r}"
                if compared(op):
                    assert got == want, f"{where}: spec {want}, port {got}"
                if observe is not None:
                    assert canonical(observe(port)) == canonical(ref.snapshot()), where
                done += 1
        finally:
            _step(port, ("close",))
    return done


SEQUENTIAL = [p for p in REWRITES if p.stem != "r_bg_writer_loop"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", SEQUENTIAL, ids=[p.stem for p in SEQUENTIAL])
def test_the_rewrite_agrees_with_the_spec_on_random_ops(path: Path) -> None:
    module = _load(path)
    cls = module.BlockObjectStore
    profile = module.PROFILE
    observe = observe_vllm if profile == "upstream" else (lambda store: store.snapshot())
    done = _compare(
        lambda mb, n: cls(max_bytes=mb, object_nbytes=n),
        lambda mb, n: ReferenceStore(max_bytes=mb, object_nbytes=n, profile=profile),
        observe,
        hasattr(cls, "read_into"),
        seed=sum(map(ord, path.stem)),
    )
    assert done >= 2000
    print(f"{path.stem}: {done} ops agree")


@pytest.mark.timeout(300)
def test_the_background_rewrite_agrees_with_the_spec_on_random_ops() -> None:
    module = _load(PORTS / "rewrites" / "r_bg_writer_loop.py")
    rng = random.Random(5)
    pending = {"n": 1}

    def port(mb: int, n: int) -> Any:
        pending["n"] = rng.randint(1, 3)
        return module.BackgroundBlockObjectStore(
            module.BlockObjectStore(max_bytes=mb, object_nbytes=n), max_pending_batches=pending["n"]
        )

    def ref(mb: int, n: int) -> Any:
        return ReferenceBackgroundStore({"max_bytes": mb, "object_nbytes": n}, max_pending_batches=pending["n"])

    # A put may or may not see a failure still in flight; reads and close always do.
    done = _compare(port, ref, None, True, seed=6, compared=lambda op: op[0] != "put")
    assert done >= 2000
    print(f"r_bg_writer_loop: {done} ops agree")
