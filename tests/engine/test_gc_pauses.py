"""`fewer_gc_pauses` (sim/engine/gc_pauses.py): the objects that exist leave the collector's scans
and young collections run less often for the block; both are restored after it, and blocks nest."""

import gc

from sim.engine.gc_pauses import YOUNG_THRESHOLD, fewer_gc_pauses


def test_freezes_and_raises_the_young_threshold_for_the_block_only():
    before_threshold = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    kept = [object() for _ in range(10)]  # objects that exist before the block
    with fewer_gc_pauses():
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == max(YOUNG_THRESHOLD, before_threshold[0])
        assert gc.get_threshold()[1:] == before_threshold[1:]
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before_threshold
    assert len(kept) == 10


def test_a_nested_block_leaves_the_outer_one_in_force():
    threshold = gc.get_threshold()
    with fewer_gc_pauses():
        frozen = gc.get_freeze_count()
        raised = gc.get_threshold()
        with fewer_gc_pauses():
            assert gc.get_threshold() == raised
        assert gc.get_freeze_count() == frozen  # the inner block did not unfreeze them
        assert gc.get_threshold() == raised
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == threshold


def test_cycles_made_inside_are_still_collected():
    class Node:
        pass

    with fewer_gc_pauses():
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
        assert gc.collect() >= 2  # the collector stays on for objects made inside


def test_restored_when_the_block_raises():
    threshold = gc.get_threshold()
    try:
        with fewer_gc_pauses():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == threshold
