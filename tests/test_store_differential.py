"""BlockObjectStore against the spec, step by step, with auxspec's reusable
differential state machine; and proof that the machine catches broken stores."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from auxspec.drivers.stateful import DifferentialMachine, DivergenceFound, differential_machine
from auxspec.engine import target as targets
from auxstore import BlockObjectStore, CapacityError

StoreMachine = differential_machine(
    lambda max_bytes, object_nbytes: BlockObjectStore(max_bytes=max_bytes, object_nbytes=object_nbytes),
    profile="strict",
    name="BlockObjectStoreMachine",
)

TestBlockObjectStoreMatchesSpec = pytest.mark.timeout(400)(pytest.mark.slow(StoreMachine.TestCase))
TestBlockObjectStoreMatchesSpec.settings = settings(max_examples=500, stateful_step_count=50, deadline=None)


# ------------------------------------------------------------ broken stores
# Each breaks one rule of the semantics; the machine must notice. Shrinking
# is skipped: only the failure matters, and derandomize keeps CI repeatable.
_FIND_BUG = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
)


class _GetDoesNotRefresh(BlockObjectStore):
    """Reads without moving the keys read to the most-recent end."""

    def get_concatenated(self, keys: list[str]) -> bytes:
        snapshot = dict(self.snapshot().entries)
        keys = list(keys) if not isinstance(keys, (str, bytes)) else keys
        if isinstance(keys, (str, bytes)) or any(not isinstance(k, str) or k not in snapshot for k in keys):
            return super().get_concatenated(keys)  # the errors are right; only success is broken
        self.flush()
        return b"".join(snapshot[key] for key in keys)


class _EvictsPinned(BlockObjectStore):
    """Chooses victims in global recency order, ignoring references."""

    def _select_victims(
        self, excess: int, batch: dict[str, bytes], changed: dict[str, int], terminal: list[str]
    ) -> list[str]:
        # Pinned keys first (their order is not kept), then the unpinned ones.
        victims = [key for key in [*self._pinned, *self._lru] if key not in batch][:excess]
        if len(victims) < excess:
            raise CapacityError("full")
        return victims  # the store's apply drops a victim from either table


@pytest.mark.timeout(300)
@pytest.mark.parametrize("broken", [_GetDoesNotRefresh, _EvictsPinned], ids=lambda cls: cls.__name__)
def test_machine_catches_a_broken_store(broken: type[BlockObjectStore]) -> None:
    machine = differential_machine(
        lambda max_bytes, object_nbytes: broken(max_bytes=max_bytes, object_nbytes=object_nbytes)
    )
    with pytest.raises(DivergenceFound):
        run_state_machine_as_test(machine, settings=_FIND_BUG)


def test_machine_needs_a_target() -> None:
    # The base class refuses to run without make_target, rather than pass.
    with pytest.raises(NotImplementedError):
        run_state_machine_as_test(DifferentialMachine, settings=_FIND_BUG)


def test_unknown_profile_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown profile"):
        differential_machine(lambda m, n: None, profile="lenient")


# -------------------------------------------------- reuse on another store
# The same machine verifies vLLM's own module against the upstream profile,
# given only a factory and an observer: what a port author writes.


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_vllm_module_matches_upstream_profile() -> None:
    module = targets.load_upstream()
    if module is None:
        pytest.skip("vLLM's module (../shared/upstream/vllm_store.py or $AUXSTORE_UPSTREAM) is not available")

    def make(max_bytes: int, object_nbytes: int) -> Any:
        return module.BlockObjectStore(max_bytes=max_bytes, object_nbytes=object_nbytes)

    machine = differential_machine(make, profile="upstream", observe=targets.observe_vllm, name="VllmMachine")
    run_state_machine_as_test(
        machine, settings=settings(max_examples=150, stateful_step_count=40, deadline=None, database=None)
    )
