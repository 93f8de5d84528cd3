"""Plots that agree with each other (issue 22 item 4), asserted on the figure objects:
utilisation.png and links.png both draw the link table's two utilisations, labelled as such (bytes
over capacity, busy time); the link the bottleneck report names is drawn in both; overlapping lines
stay distinguishable; sweep plots draw text values as categorical ticks and physical quantities
with unit prefixes.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from sim import load_scenario, run
from sim.report.plots import BUSY_TIME, BYTES_OVER_CAPACITY, link_kind_summary, run_time_of
from sim.studies.sweep_plots import plot_metric


@pytest.fixture(scope="module")
def fabric_bound():
    """An all-to-all over a 4:1 oversubscribed fat-tree: the leaf uplinks (fabric) bound it, and
    fabric links carry no spans of their own."""
    return run(load_scenario("scenarios/alltoall-fattree-oversub.yaml", ["workload.bytes=16MiB"]))


def _texts(fig) -> str:
    parts = []
    for ax in fig.axes:
        parts += [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
        parts += [t.get_text() for t in ax.get_yticklabels()]
        legend = ax.get_legend()
        if legend:
            parts += [t.get_text() for t in legend.get_texts()] + [legend.get_title().get_text()]
    return "\n".join(parts)


def test_utilisation_and_links_plots_draw_both_utilisations_with_labels(fabric_bound):
    for fig in (fabric_bound.plot.utilisation(), fabric_bound.plot.links()):
        text = _texts(fig)
        assert BYTES_OVER_CAPACITY in text and BUSY_TIME in text
        assert "%" in text  # axes in % of the run
        plt.close(fig)


def test_the_bars_are_the_link_table_numbers(fabric_bound):
    links = fabric_bound.links
    assert run_time_of(links) == pytest.approx(fabric_bound.sim_time_s)
    summary = link_kind_summary(links, fabric_bound.sim_time_s).set_index("kind")
    fabric = links[links["kind"] == "fabric"]
    assert summary.loc["fabric", "bytes_over_capacity"] == fabric["utilisation"].max()
    top = fabric.sort_values("utilisation", ascending=False).iloc[0]
    assert summary.loc["fabric", "busy_fraction"] == pytest.approx(top["busy_s"] / fabric_bound.sim_time_s)
    fig = fabric_bound.plot.links()
    widths = sorted(p.get_width() for p in fig.axes[0].patches)
    assert widths[-1] == pytest.approx(
        100 * max(links["utilisation"].max(), (links["busy_s"].max() / fabric_bound.sim_time_s))
    )
    plt.close(fig)


def test_the_fabric_link_that_bounds_the_run_appears_in_both_plots(fabric_bound):
    report = fabric_bound.bottleneck
    bounding = report.get("link")
    util_fig, links_fig = fabric_bound.plot.utilisation(), fabric_bound.plot.links()
    assert "switch fabric" in _texts(util_fig)  # fabric links have no spans: drawn from the link table
    if bounding:
        assert bounding in _texts(util_fig) and bounding in _texts(links_fig)
        assert "bounds the run" in _texts(links_fig)
    plt.close(util_fig)
    plt.close(links_fig)


def test_no_utilisation_line_hides_another():
    result = run(
        load_scenario("scenarios/allreduce-2x8-h100.yaml", ["workload.bytes=16MiB", "workload.algorithm=ring"])
    )
    fig = result.plot.utilisation()
    lines = fig.axes[0].get_lines()
    assert len(lines) >= 2
    styles = [(ln.get_linestyle(), ln.get_marker(), ln.get_linewidth()) for ln in lines]
    assert len(set(styles)) == len(styles)
    # a line drawn later is thinner than the ones before: equal values leave the earlier one visible
    assert [s[2] for s in styles] == sorted((s[2] for s in styles), reverse=True)
    plt.close(fig)


def test_sweep_plot_draws_text_values_as_categorical_ticks_and_units_with_prefixes():
    table = pd.DataFrame(
        {
            "workload.algorithm": ["ring", "tree", "hierarchical"] * 2,
            "fidelity.replay": [True] * 3 + [False] * 3,
            "busbw_bytes_per_s": [1.0e11, 1.1e11, 2.0e11, 1.0e11, 1.2e11, 2.0e11],
            "status": ["ok"] * 6,
        }
    )
    fig = plot_metric(table, "busbw_bytes_per_s", "workload.algorithm", by=["fidelity.replay"])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["ring", "tree", "hierarchical"]
    assert ax.get_ylabel() == "busbw_bytes_per_s [B/s]"
    fig.canvas.draw()
    assert any(t.get_text().endswith("GB/s") for t in ax.get_yticklabels())
    assert [ln.get_label() for ln in ax.get_lines()] == ["fidelity.replay=on", "fidelity.replay=off"]
    a, b = (ln.get_xdata() for ln in ax.get_lines())
    assert all(x != y for x, y in zip(a, b))  # the two lines' points sit side by side, not on top
    plt.close(fig)

    on_off = pd.DataFrame({"x": ["on", "off"], "time_s": [2e-3, 5e-4], "status": ["ok", "ok"]})
    fig = plot_metric(on_off, "time_s", "x")
    fig.canvas.draw()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["on", "off"]
    assert {t.get_text() for t in ax.get_yticklabels()} & {"1 ms", "2 ms", "500 µs"}
    plt.close(fig)


def test_sweep_plot_of_sizes_has_binary_prefixed_ticks():
    table = pd.DataFrame({"workload.bytes": ["1 MiB", "64 MiB", "1 GiB"], "time_s": [1e-4, 2e-3, 3e-2]})
    fig = plot_metric(table, "time_s", "workload.bytes")
    fig.canvas.draw()
    ticks = {t.get_text() for t in fig.axes[0].get_xticklabels()}
    assert {"1 MiB", "64 MiB", "1 GiB"} <= ticks
    plt.close(fig)
