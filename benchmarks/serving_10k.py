"""Speed benchmark of `kind: serving`: 10,000 requests over 16 replicas (issue 27: < 30 s).

Llama 3 8B (BF16) on 16 H100 hosts, one TP8 replica per host, least-loaded router, Poisson arrivals
at 200/s with lognormal prompts (mean 1,000 tokens) and exponential outputs (mean 200 tokens), an
8K-token budget with chunked prefill. The run goes through `sim.run` exactly as `dcsim run` does
(energy meter and bottleneck report included). Prints the wall time of each repetition, their
median, the events and the main metrics; the machine may be shared, so the median of 3 is the figure.

    python benchmarks/serving_10k.py [--requests 10000] [--replicas 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

SCENARIO = """
name: serving-10k-bench
seed: 0
hardware: {{gpu: h100-sxm, gpus_per_node: 8, nodes: {replicas}, scale_up: nvlink4, nic: cx7-400g-rdma,
           topology: {{kind: single-switch}}}}
workload:
  kind: serving
  model: llama3-8b
  pools: [{{name: fleet, replicas: {replicas}, tp: 8}}]
  router: least-loaded
  scheduler: {{max_batch_tokens: 8192, max_seqs: 256}}
  arrivals:
    process: poisson
    rate_per_s: {rate}
    count: {requests}
    prompt_tokens: {{dist: lognormal, mean: 1000, sigma: 1.0, max: 32000}}
    decode_tokens: {{dist: exponential, mean: 200, min: 1, max: 2000}}
  slo: {{ttft_s: 1, tpot_s: 0.05}}
"""


def main() -> None:
    import tempfile

    from sim import load_scenario, run

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--replicas", type=int, default=16)
    ap.add_argument("--rate", type=float, default=200.0, help="arrivals per second")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(SCENARIO.format(replicas=args.replicas, requests=args.requests, rate=args.rate))
    walls, result = [], None
    for i in range(args.repeat):
        start = time.perf_counter()
        result = run(load_scenario(f.name), limits=None)
        walls.append(time.perf_counter() - start)
        print(f"run {i + 1}: {walls[-1]:.2f} s wall", flush=True)
    m = result.metrics
    print(
        f"median of {args.repeat}: {statistics.median(walls):.2f} s wall for {args.requests} requests over "
        f"{args.replicas} replicas ({result.events:,} events, {m['iterations']:,} iterations, "
        f"{result.sim_time_s:.1f} s simulated)"
    )
    print(
        f"TTFT p50 {m['ttft_p50_s'] * 1e3:.1f} ms, p99 {m['ttft_p99_s'] * 1e3:.1f} ms; TPOT p50 "
        f"{m['tpot_p50_s'] * 1e3:.2f} ms; throughput {m['throughput_tokens_per_s']:,.0f} output tokens/s; "
        f"goodput {m['goodput_requests_per_s']:.1f} requests/s"
    )


if __name__ == "__main__":
    main()
