"""`fewer_gc_pauses` (sim/engine/gc_pauses.py): no automatic collection and the existing objects
frozen out of the collector for the block; the collector as it was after it; blocks nest. And its
premise: a run makes next to no reference cycles, so nothing piles up while the collector is off."""

import gc

from sim import load_scenario, run
from sim.engine.gc_pauses import fewer_gc_pauses


def test_collection_is_off_and_objects_frozen_for_the_block_only():
    threshold = gc.get_threshold()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    kept = [object() for _ in range(10)]  # objects that exist before the block
    with fewer_gc_pauses():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0
        made = [[i] for i in range(1000)]  # objects made and kept inside
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_threshold() == threshold
    assert gc.get_count()[0] < 1000  # what the block kept joined the old generation, unscanned
    assert len(kept) == 10 and len(made) == 1000


def test_a_nested_block_leaves_the_outer_one_in_force():
    with fewer_gc_pauses():
        frozen = gc.get_freeze_count()
        with fewer_gc_pauses():
            assert not gc.isenabled()
        assert not gc.isenabled()
        assert gc.get_freeze_count() == frozen  # the inner block did not unfreeze them
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_caller_that_turned_collection_off_keeps_it_off():
    gc.disable()
    try:
        with fewer_gc_pauses():
            assert gc.get_freeze_count() == 0
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_restored_when_the_block_raises():
    try:
        with fewer_gc_pauses():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_run_leaves_next_to_nothing_to_collect():
    """The premise: runs of the flow network (collectives, bundles, replay) and of SimPy processes
    (ingestion workers: a process per batch) make next to no reference cycles. Each scenario runs once
    first, so that what is loaded or compiled once per process is not counted."""
    for path, overrides in (
        ("scenarios/allreduce-2x8-h100.yaml", []),
        ("scenarios/ingest-dlrm-disaggregated.yaml", ["workload.duration_s=20"]),
        ("scenarios/train-moviegen-30b-video-dit-1024-gpus.yaml", []),
    ):
        scenario = load_scenario(path, overrides)
        run(scenario)  # once before: compiling numba's kernels (a fresh checkout) makes cycles of its own
        gc.collect()
        gc.disable()
        try:
            result = run(scenario)
            assert result.metrics
            assert gc.collect() < 5_000, path  # garbage in cycles the run made (its result is alive)
            del result
        finally:
            gc.enable()
