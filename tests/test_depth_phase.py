"""The depth phase (``drivers.depth``, ``generators.depth``) in the fast tier:
each depth port of tests/ports/depth, with its threshold lowered to what the
small scale reaches, is flagged at seeds 1-3 and its catch shrinks to a
shorter trace that still diverges; each deep rewrite (and the plain deep
store) conforms at that scale; the shrinker's joins keep the spec's
outcome. The full-scale runs are in tests/test_depth_ports.py (slow)."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from auxspec import cli
from auxspec.drivers import depth as phase
from auxspec.drivers import gated
from auxspec.drivers.verify import Reach, exec_target, explore_depth
from auxspec.engine.compare import compare
from auxspec.engine.expect import background_batch, background_step, expected_outcomes
from auxspec.engine.ops import Get, Put, Trace
from auxspec.engine.target import Target, load_target
from auxspec.generators import depth
from auxspec.generators.background import Release
from auxspec.models import background as bg
from auxspec.models import sequential as model

PORTS = Path(__file__).resolve().parent / "ports" / "depth"
sys.path.insert(0, str(PORTS))

# Each buggy port's threshold, lowered to what the small scale's lives reach
# (the full scale's are the files' own: 65,536 touches, 60,000 keys, ...).
SMALL_THRESHOLDS: dict[str, dict[str, int]] = {
    "d_recency_stamp_16_bits": {"WRAP": 700},
    "d_slot_index_16_bits": {"MASK": 127},
    "d_pin_count_16_bits": {"MASK": 255},
    "d_key_ids_mod_60000": {"IDS": 600},
    "d_hits_in_16_bits": {"WRAP": 1024},
    "d_capacity_failures_10_bits": {"WRAP": 32},
    "d_bulk_read_over_3000_no_touch": {"BULK": 100},
    "d_bulk_put_over_1500_keeps_pins": {"BULK": 100},
    "d_release_over_2500_sorted": {"BULK": 100},
    "d_compaction_every_40000_puts": {"EVERY": 300},
    "d_read_into_over_4000_slot_order": {"BULK": 100},
    "d_put_number_16_bits": {"MASK": 511},
    "d_cached_pins_bulk_release_2000": {"BULK_SKIP": 100},
}
# The background store's depth port (its bug is in the writer's queue, not in the store).
BACKGROUND = ["d_background_ring_10_bits"]
BUGGY = sorted(p.stem for p in PORTS.glob("d_*.py") if p.stem not in BACKGROUND)
CORRECT = ["_deep", *sorted(p.stem for p in PORTS.glob("r_*.py"))]
SMALL_REWRITES = {"r_renumbered_stamps": {"WRAP": 700}, "r_chunked_bulk_paths": {"BULK": 100, "CHUNK": 7}}


def _target(name: str, lowered: dict[str, int]) -> Target:
    """The port ``name`` with the class attributes ``lowered`` (its thresholds) set."""
    target = load_target(str(PORTS / f"{name}.py"))
    base = type(target.factory(16, 1))
    cls = type(f"Small_{name}", (base,), dict(lowered))

    def build(max_bytes: Any, object_nbytes: Any) -> Any:
        return cls(max_bytes=max_bytes, object_nbytes=object_nbytes)

    return replace(target, label=f"{name} (small)", factory=build)


def test_every_buggy_port_has_a_small_threshold() -> None:
    assert set(BUGGY) == set(SMALL_THRESHOLDS)
    assert len(BUGGY) >= 10


@pytest.mark.parametrize("name", BUGGY)
def test_a_depth_port_at_a_small_threshold_is_flagged_and_shrunk(name: str) -> None:
    target = _target(name, SMALL_THRESHOLDS[name])
    for seed in (1, 2, 3):
        run = phase.explore_depth(target, "strict", seed, 120, scale=depth.SMALL, shrink_seconds=3)
        assert run.divergence is not None, f"{name} not flagged at seed {seed}"
        assert run.found_at is not None and len(run.divergence.trace.ops) <= run.found_at
        again = compare(run.divergence.trace, target)  # the shrunk trace still diverges, checked op by op
        assert again is not None, f"{name}: the shrunk trace no longer diverges"


@pytest.mark.parametrize("name", CORRECT)
def test_the_deep_store_and_rewrites_conform_at_small_scale(name: str) -> None:
    target = _target(name, SMALL_REWRITES.get(name, {}))
    for seed in (1, 2, 3):
        run = phase.explore_depth(target, "strict", seed, 120, scale=depth.SMALL)
        assert run.divergence is None, run.divergence.render(last=5) if run.divergence else ""
        assert run.complete and run.lives == 2


def _ring_target(ring: int) -> Target:
    """The background depth port with its ring lowered to ``ring`` slots."""
    target = load_target(str(PORTS / "d_background_ring_10_bits.py"))
    assert target.background is not None
    base = cast(Any, target.background)
    policy = type("SmallRing", (base.POLICY,), {"RING": ring})
    return replace(target, background=type("SmallRingStore", (base,), {"POLICY": policy}))


def test_the_background_depth_port_is_flagged_and_cut_to_a_round() -> None:
    """Its ring lowered below the small life's longest round: flagged at
    seeds 1-3, the scenario cut to fewer rounds that still violate."""
    target = _ring_target(32)
    for seed in (1, 2, 3):
        life = depth.background_life("strict", target.features, seed, depth.SMALL)
        assert life.depth.queued > 32
        run = phase.explore_depth(target, "strict", seed, 120, scale=depth.SMALL, shrink_seconds=3)
        assert run.violation is not None and run.scenario is not None, f"not flagged at seed {seed}"
        assert len(run.scenario.ops) < len(life.scenario.ops)
        assert phase.background_violation(target, run.scenario) is not None


@pytest.mark.parametrize("label", ["auxstore", "vllm"])
def test_background_stores_conform_through_the_small_background_life(label: str) -> None:
    """The bundled store and vLLM's, each under its profile: the small
    background life (queues past the bound, a failure latched deep in the
    last one) agrees with the background spec at seeds 1-3."""
    if label == "vllm":
        upstream, profile = gated.upstream_target(), "upstream"
        if upstream is None:
            pytest.skip("vLLM's module is not at /work/shared/upstream")
        target = upstream
    else:
        target, profile = load_target("auxstore"), "strict"
    for seed in (1, 2, 3):
        life = depth.background_life(profile, target.features, seed, depth.SMALL)
        assert life.depth.queued >= depth.SMALL.bound[0]
        assert phase.background_violation(target, life.scenario) is None


def test_the_background_models_remembered_tails_change_no_outcome() -> None:
    """``models.background`` remembers where a quiet queue ends (so a long
    queue costs O(batch) per put): a background life's puts, releases and
    reads, stepped with the memo and with it emptied before every step,
    give the same states and outcomes."""
    life = depth.background_life("strict", depth.ALL_FEATURES, 4, depth.SMALL)
    scenario = life.scenario
    start = bg.new_background(model.new(scenario.max_bytes, scenario.object_nbytes, "strict"), 7, faults=(60,))
    assert isinstance(start, bg.BgState)
    states = [start, start]
    for step in scenario.ops[:400]:
        for index in (0, 1):
            if index:
                bg._TAILS.clear()
            state = states[index]
            if isinstance(step, Release):
                for _ in range(min(step.batches, bg.inner_calls_to_drain(state))):
                    state = bg.writer_step(state)
                states[index] = state
            elif isinstance(step, Put):
                batch = background_batch(step)
                while not (alternatives := bg.put(state, batch)):
                    state = bg.writer_step(state)
                states[index] = alternatives[0][0]
                if index == 0:
                    outcomes = alternatives
                else:
                    assert alternatives == outcomes
            else:
                after, outcome = background_step(state, step)
                states[index] = after
                if index == 0:
                    seen = outcome
                else:
                    assert outcome == seen
        assert states[0] == states[1]


def test_small_lives_reach_their_own_scale() -> None:
    """The small scale's figures show the lives do what they are for."""
    plans = depth.lives("strict", depth.ALL_FEATURES, 1, depth.SMALL)
    made = [plan.build() for plan in plans]
    reached = depth.figures(made, [len(life.trace.ops) for life in made])
    small = depth.SMALL
    assert min(reached.puts, reached.misses, reached.evictions) >= small.calls
    assert reached.pins >= small.pins and reached.key_list == small.most
    assert reached.capacity_failures >= small.failures
    assert reached.slots >= small.wide_slots[0] and reached.read_into == small.most


def test_joins_keep_the_specs_outcomes() -> None:
    """Adjacent hits joined into one read give the reads' bytes joined;
    adjacent pin-only puts joined give the same pins."""
    ops = (
        Put((("a", b"1"), ("b", b"2"))),
        Get(("a",)),
        Get(("a",)),
        Get(("b", "a")),
        Put((), ("a",)),
        Put((), ("a", "b")),
        Put((), (), ("a",)),
        Put((), (), ("a", "b")),
    )
    trace = Trace("strict", 4, 1, ops)
    classes = [phase._class_of(op, outcome) for op, (outcome, _) in zip(ops, expected_outcomes(trace), strict=True)]
    joined = phase._joined(ops, classes)
    assert joined == (
        ops[0],
        Get(("a", "a", "b", "a")),
        Put((), ("a", "a", "b")),
        Put((), (), ("a", "a", "b")),
    )
    before = list(expected_outcomes(trace))[-1][1]
    after = list(expected_outcomes(Trace("strict", 4, 1, joined)))[-1][1]
    assert before == after


def test_the_phase_runs_through_the_protocol(tmp_path: Path) -> None:
    """A depth port behind ``auxspec serve`` (``--exec``), its threshold
    lowered to the small scale's reach: flagged, with no Python-only form
    sent (the process declares its features in its handshake)."""
    port = tmp_path / "low_bulk_read.py"
    port.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(PORTS)!r})\n"
        "from d_bulk_read_over_3000_no_touch import BlockObjectStore as Deep\n"
        "class BlockObjectStore(Deep):\n"
        "    BULK = 100\n"
    )
    auxspec = Path(sys.executable).with_name("auxspec")
    target, stop = exec_target(f"{shlex.quote(str(auxspec))} serve {shlex.quote(str(port))}", op_timeout=60.0)
    try:
        run = phase.explore_depth(target, "strict", 1, 120, scale=depth.SMALL, shrink_seconds=3)
    finally:
        stop()
    assert run.divergence is not None
    assert "python" not in target.features


def test_a_slow_port_process_is_cut_short_and_says_how_deep_it_got() -> None:
    """The full lives through ``auxspec serve`` (``--exec``) for 8 s: far
    too few for them, so the run is not complete, the figures say how deep
    it got (the wide life's first calls), and verify's scope names every
    goal left short instead of failing the port."""
    auxspec = Path(sys.executable).with_name("auxspec")
    command = f"{shlex.quote(str(auxspec))} serve {shlex.quote(str(PORTS / '_deep.py'))}"
    target, stop = exec_target(command, op_timeout=60.0)
    reach = Reach()
    try:
        run = explore_depth(target, "strict", 1, 8.0, frozenset(), reach)
    finally:
        stop()
    assert run.divergence is None and not run.complete
    # The figures count what ran (building the wide life takes seconds of the 8 on a loaded machine).
    assert run.ops == 0 or run.depth.keys > 0
    assert reach.depth_short == run.depth.short_of(target.features) != []
    assert "depth puts" in " ".join(reach.depth_short)  # the long life's 70,000 puts never began


def test_verify_reports_the_depth_reached_when_cut_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--depth on`` with a budget far too short for the lives: the run
    conforms, and the report says how deep it got and which goals it left short."""
    code = cli.main(
        [
            *("verify", str(PORTS / "_deep.py"), "--depth", "on", "--max-time", "2", "--seed", "1"),
            *("--large-stores", "off", "--json", "--out", str(tmp_path / "d.jsonl")),
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["depth"]["ran"] and not report["depth"]["complete"]
    assert set(report["depth"]["reached"]) == set(depth.GOALS)
    assert any(line.startswith("depth ") for line in report["scope"]["not_reached"])
    assert "depth" in report["scope"]["phases"]
