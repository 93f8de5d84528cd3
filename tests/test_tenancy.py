"""Multi-tenancy: several jobs (`workloads:`) on one cluster share its links; each job sees only its
hosts; placement (packed / spread) decides whether their traffic meets; errors are one line."""

import json

import pytest

from sim.engine.simulation import Simulation
from sim.errors import ScenarioError
from sim.runner import run
from sim.scenario.jobs import ClusterView, JobSimulation, parse_host_set, place_jobs
from sim.scenario.model import scenario_from_dict
from tests.end_to_end.test_cli import cli, write

# 8 hosts x 8 GPUs on a three-layer Clos: 2 hosts per ToR, 4 hosts per pod, 2 pods joined by a 7:1
# oversubscribed core. Packed jobs stay inside their pod; spread jobs both cross the core.
HARDWARE = {
    "gpu": "h100-sxm",
    "gpus_per_node": 8,
    "nodes": 8,
    "topology": {"kind": "clos3", "gpus_per_tor": 16, "gpus_per_pod": 32, "oversubscription": 7},
}


def allreduce_job(name, hosts, nbytes="1 GiB"):
    return {
        "name": name,
        "hosts": hosts,
        "kind": "collective",
        "op": "all_reduce",
        "bytes": nbytes,
        "algorithm": "hierarchical",
    }


def two_jobs(placement, **extra):
    return scenario_from_dict(
        {
            "name": "t",
            "hardware": HARDWARE,
            **extra,
            "workloads": [
                allreduce_job("a", {"count": 4, "placement": placement}),
                allreduce_job("b", {"count": 4, "placement": placement}),
            ],
        }
    )


@pytest.fixture(scope="module")
def packed():
    return run(two_jobs("packed"))


@pytest.fixture(scope="module")
def spread():
    return run(two_jobs("spread"))


def test_each_job_reports_its_metrics_kind_hosts_and_slowdown(packed):
    summary = packed.summary()
    assert summary["kind"] == "multi"
    jobs = summary["metrics"]["jobs"]
    assert set(jobs) == {"a", "b"}
    assert jobs["a"]["hosts"] == [0, 1, 2, 3] and jobs["b"]["hosts"] == [4, 5, 6, 7]
    for job in jobs.values():
        assert job["kind"] == "collective" and job["gpus"] == 32 and job["ranks"] == 32
        assert {"time_s", "busbw_bytes_per_s", "completion_s", "alone_completion_s", "slowdown_vs_alone"} <= job.keys()
    assert summary["metrics"]["makespan_s"] == pytest.approx(max(j["completion_s"] for j in jobs.values()))


def test_jobs_placed_apart_do_not_slow_each_other(packed):
    for job in packed.metrics["jobs"].values():
        assert job["slowdown_vs_alone"] == pytest.approx(1.0, abs=1e-9)


def test_jobs_spread_over_the_same_core_links_slow_each_other(spread):
    jobs = spread.metrics["jobs"]
    assert jobs["a"]["hosts"] == [0, 2, 4, 6] and jobs["b"]["hosts"] == [1, 3, 5, 7]
    for job in jobs.values():
        assert job["slowdown_vs_alone"] > 1.3
    # what they share are the oversubscribed pod-core links
    core = spread.links[spread.links["link"].str.contains("core")]
    assert core["bytes"].sum() > 0


def test_same_seed_same_metrics():
    assert run(two_jobs("spread")).metrics["jobs"] == run(two_jobs("spread")).metrics["jobs"]


def test_a_job_sees_only_its_hosts():
    scenario = two_jobs("spread")
    sim = Simulation(0)
    from sim.cluster.cluster import Cluster

    cluster = Cluster.build(sim, scenario.hardware)
    view = ClusterView.of(cluster, [1, 3])
    assert view.num_gpus == 16 and view.hardware.nodes == 2 and view.hardware.num_gpus == 16
    assert view.nodes([0, 8]) == ["h1/g0", "h3/g0"]
    assert view.topology.hosts == [cluster.topology.hosts[1], cluster.topology.hosts[3]]
    assert view.network is cluster.network  # shared links


def test_jobs_draw_from_their_own_random_substreams():
    sim = Simulation(seed=3)
    a, b = JobSimulation(sim, "a"), JobSimulation(sim, "b")
    draw_a = a.rng("arrivals").random()
    assert draw_a == Simulation(seed=3).rng("job:a/arrivals").random()  # the same alone or beside others
    assert draw_a != b.rng("arrivals").random()


def test_placement_scheduler():
    assert parse_host_set("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    jobs = two_jobs("packed").workloads
    mixed = scenario_from_dict(
        {
            "name": "t",
            "hardware": HARDWARE,
            "workloads": [
                allreduce_job("z", {"count": 3, "placement": "spread"}),
                allreduce_job("y", "0-1"),
                allreduce_job("x", {"count": 2, "placement": "packed"}),
            ],
        }
    ).workloads
    # explicit host sets are reserved first; then in list order: spread strides over the free hosts,
    # packed takes the first run of consecutive free hosts (here there is none left: the lowest free)
    assert place_jobs(mixed, 8) == [[2, 4, 6], [0, 1], [3, 5]]
    assert place_jobs(jobs, 8) == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize(
    "workloads, path, words",
    [
        ([allreduce_job("a", "0-3"), allreduce_job("b", "2-5")], "workloads.1.hosts", "already used by job 'a'"),
        ([allreduce_job("a", "0-3"), allreduce_job("b", {"count": 5})], "workloads.1.hosts", "only 4 of 8 are free"),
        ([allreduce_job("a", "0-3"), allreduce_job("a", "4-5")], "workloads.1.name", "unique"),
        ([allreduce_job("a", "6-9")], "workloads.0.hosts", "host 8 does not exist"),
        ([allreduce_job("a", "3-1")], "workloads.0.hosts", "ends before it starts"),
        ([allreduce_job("a", {"count": 2, "placement": "random"})], "workloads.0.hosts", "placement"),
        (
            [
                {
                    "name": "cp",
                    "hosts": "0-1",
                    "kind": "cp_inference",
                    "model": "llama3-8b",
                    "parallelism": {"tp": 8, "cp": 4},
                    "requests": [{"prompt_tokens": 1024}],
                }
            ],
            "workloads.0.parallelism",
            "must equal the cluster's 16 GPUs",
        ),
        ([{**allreduce_job("a", "0-1"), "group": 17}], "workloads.0.group", "cluster's 16 GPUs"),
        ([{**allreduce_job("a", "0-1"), "bogus": 1}], "workloads.0.bogus", "allowed: algorithm"),
    ],
)
def test_bad_jobs_are_one_line_errors(tmp_path, workloads, path, words):
    import yaml

    text = yaml.safe_dump({"name": "t", "hardware": HARDWARE, "workloads": workloads})
    code, out, err = cli("run", write(tmp_path, text), "--json")
    assert code == 2 and out == ""
    line = err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert path in line and words in line


def test_workload_and_workloads_are_exclusive():
    with pytest.raises(ScenarioError, match="either workload"):
        scenario_from_dict(
            {
                "name": "t",
                "hardware": HARDWARE,
                "workloads": [allreduce_job("a", "0")],
                "workload": {"kind": "collective", "bytes": 1},
            }
        )
    with pytest.raises(ScenarioError, match="either workload"):
        scenario_from_dict({"name": "t", "hardware": HARDWARE})


def test_cli_table_json_and_resolved_scenario(tmp_path):
    import yaml

    text = yaml.safe_dump(
        {
            "name": "t",
            "hardware": HARDWARE,
            "workloads": [
                allreduce_job("a", {"count": 2}, "64 MiB"),
                allreduce_job("b", {"count": 2, "placement": "spread"}, "64 MiB"),
            ],
        }
    )
    code, out, _ = cli("run", write(tmp_path, text), "--out", str(tmp_path / "res"))
    assert code == 0 and "slowdown" in out and "job a (collective)" in out and "(multi)" in out
    code, out, _ = cli("run", str(tmp_path / "res" / "scenario.resolved.yaml"), "--json")
    summary = json.loads(out)
    assert summary["kind"] == "multi"
    assert summary["metrics"]["jobs"] == json.loads((tmp_path / "res" / "summary.json").read_text())["metrics"]["jobs"]
