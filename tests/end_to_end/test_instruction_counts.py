"""benchmarks/instructions.py reads callgrind's totals to compare two versions of the code by the
instructions a run executes (wall times on a shared VM move by more than the changes measured)."""

from __future__ import annotations

import pytest

from benchmarks.instructions import estimated_cycles, totals

# the head and the end of a callgrind output file, as callgrind 3.19 writes them
WITH_CACHE = """# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir I1mr D1mr D1mw ILmr DLmr DLmw
fl=(1) ???
fn=(1) 0x0000000000001100
0 3 1
summary: 1000 20 30 40 2 3 4
totals: 1000 20 30 40 2 3 4
"""


def test_the_totals_are_counted_per_event_named_on_the_events_line():
    assert totals(WITH_CACHE) == {"Ir": 1000, "I1mr": 20, "D1mr": 30, "D1mw": 40, "ILmr": 2, "DLmr": 3, "DLmw": 4}
    assert totals("events: Ir\ntotals: 3210196424\n") == {"Ir": 3210196424}


def test_the_cycle_estimate_weighs_first_level_misses_10_and_last_level_misses_100():
    assert estimated_cycles(totals(WITH_CACHE)) == 1000 + 10 * (20 + 30 + 40) + 100 * (2 + 3 + 4)
    assert estimated_cycles({"Ir": 5}) is None  # counted without the cache simulation


@pytest.mark.parametrize("text", ["", "events: Ir D1mr\ntotals: 5\n", "totals: 5\n"])
def test_a_file_without_matching_events_and_totals_is_refused(text):
    with pytest.raises(ValueError, match="callgrind"):
        totals(text)
