"""dcsim's engine and workloads.

Notebook API:
    from sim import load_scenario, run
    result = run(load_scenario("scenarios/allreduce-2x8-h100.yaml", ["workload.bytes=1GiB"]))
    result.metrics, result.spans, result.links
"""

from sim.runner import RunResult, run
from sim.scenario.model import Scenario, load_scenario, scenario_from_dict

__all__ = ["RunResult", "Scenario", "load_scenario", "run", "scenario_from_dict"]
