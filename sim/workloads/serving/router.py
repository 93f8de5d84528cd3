"""Routing requests to replicas.

- `round-robin`: the next replica of the eligible pools in turn;
- `least-loaded`: the replica with the fewest tokens still to compute (prefill and decode tokens of
  the requests it holds, `ReplicaScheduler.load_tokens`), ties to the lowest index;
- `prompt-length`: the eligible pool with the largest `min_prompt_tokens` at most the request's
  prompt (e.g. long prompts to CP replicas, short ones to TP-only replicas), least-loaded inside it.

Eligible pools: mixed pools, or prefill pools when disaggregated (`first`); decode pools for a
prefilled request (`decode`).
"""

from __future__ import annotations


class Router:
    def __init__(self, config, replicas: list) -> None:
        self.policy = config.router
        self.pools = config.pools
        self.entry = [r for r in replicas if r.pool.role in ("mixed", "prefill")]
        self.decoders = [r for r in replicas if r.pool.role == "decode"]
        self._turn = {"entry": 0, "decode": 0}

    def first(self, req):
        return self._pick(self.entry, req, "entry")

    def decode(self, req):
        return self._pick(self.decoders, req, "decode")

    def _pick(self, replicas: list, req, stage: str):
        if self.policy == "round-robin":
            replica = replicas[self._turn[stage] % len(replicas)]
            self._turn[stage] += 1
            return replica
        if self.policy == "prompt-length":
            tokens = req.prompt + req.cached
            eligible = [r.pool.min_prompt_tokens for r in replicas if r.pool.min_prompt_tokens <= tokens]
            threshold = max(eligible) if eligible else min(r.pool.min_prompt_tokens for r in replicas)
            replicas = [r for r in replicas if r.pool.min_prompt_tokens == threshold]
        return min(replicas, key=lambda r: (r.scheduler.load_tokens, r.index))
