"""`kind: serving`: LLM serving at scale with context parallelism.

- `config`: the scenario section (pools of TP x CP replicas, scheduler, router, requests, SLOs).
- `requests`: Poisson / gamma arrivals with length distributions, or a trace CSV.
- `cost`: one iteration's time from cp_inference's per-layer cost functions (mixed prefill/decode
  batches, CP ring for prefill chunks, MoE experts and all-to-alls).
- `scheduler`: continuous batching with chunked prefill, a paged KV cache, preemption.
- `replica`: one SimPy process per replica (one step per iteration, its traffic on the network).
- `router`: round-robin, least-loaded, prompt-length; `workload`: placement and the run;
- `metrics`: TTFT, TPOT, TTIT, end-to-end, throughput, goodput, KV use over time;
- `kind`: the `Workload` (WORKLOAD), its documented metrics, estimate and plots (`plots`).
"""

from sim.workloads.serving.config import Config
from sim.workloads.serving.workload import simulate

__all__ = ["Config", "simulate"]
