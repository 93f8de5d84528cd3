"""The torch side of the compositions: a small Llama-style transformer stack and ring attention.

`Stack` is `layers` pre-norm decoder layers (RMSNorm, fused QKV projection, causal attention, output
projection, SwiGLU FFN) - the kernels dcsim's transformer model counts. `Stack.forward(x)` is the
single-process prefill. `Stack.forward_cp(x_local, chunk_ids, ring, group)` is the same prefill with
context parallelism over a 2N-chunk load-balanced sharding (rank i holds chunks i and 2N-1-i):

- pass-KV: each rank sends its K,V to the next rank while attending its own Q to the K,V it holds;
  after N-1 steps every Q chunk has seen every K,V chunk it may see;
- pass-Q: the Q travels instead; the owner of the K,V computes a partial output for the visiting Q
  and partial outputs go back to their owners at the end (the paper's All2All).

Partial outputs merge exactly with their log-sum-exp, so the CP output equals the single-process one
up to float rounding (the harness checks this). Attention uses torch's fused CPU flash-attention
kernel, which returns the log-sum-exp.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F


def flash(q, k, v, causal: bool):
    """Fused attention returning (out, lse): out [B,H,L,Dh], lse [B,H,L]."""
    if q.is_cuda:
        out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, causal)[:2]
        return out, lse
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)
    return out, lse


def merge(a, b):
    """Combine two partial attentions over disjoint key sets with their log-sum-exps."""
    if a is None:
        return b
    if b is None:
        return a
    (oa, la), (ob, lb) = a, b
    lse = torch.logaddexp(la, lb)
    return oa * torch.exp(la - lse).unsqueeze(-1) + ob * torch.exp(lb - lse).unsqueeze(-1), lse


def attend_chunks(q_chunks: dict, kv_chunks: dict) -> dict:
    """Partial attention of each Q chunk (id -> [B,H,C,Dh]) over the K,V chunks (id -> (k, v)) it may
    see under a causal mask: earlier chunks fully (one fused call), its own chunk causally."""
    out = {}
    for a, q in q_chunks.items():
        earlier = [kv for b, kv in sorted(kv_chunks.items()) if b < a]
        part = None
        if earlier:
            part = flash(q, torch.cat([k for k, _ in earlier], 2), torch.cat([v for _, v in earlier], 2), False)
        if a in kv_chunks:
            part = merge(part, flash(q, *kv_chunks[a], True))
        out[a] = part
    return out


def exchange(tensor, peer: int, group=None):
    """Send `tensor` to `peer` and receive a tensor of the same shape from it (2-rank ring step)."""
    tensor = tensor.contiguous()
    recv = torch.empty_like(tensor)
    reqs = [dist.isend(tensor, peer, group=group), dist.irecv(recv, peer, group=group)]
    return recv, reqs


class Layer(torch.nn.Module):
    def __init__(self, hidden: int, ffn: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.norm1 = torch.nn.RMSNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = torch.nn.Linear(hidden, hidden, bias=False)
        self.norm2 = torch.nn.RMSNorm(hidden)
        self.gate_up = torch.nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = torch.nn.Linear(ffn, hidden, bias=False)

    def _split_heads(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return q, k, v

    def _finish(self, x, attn):
        b, h, t, d = attn.shape
        x = x + self.out(attn.transpose(1, 2).reshape(b, t, h * d))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)

    def forward(self, x):
        q, k, v = self._split_heads(x)
        return self._finish(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))

    def forward_cp(self, x, chunk_ids: tuple[int, ...], ring: str, rank: int, world: int, group=None):
        q, k, v = self._split_heads(x)
        n_local = len(chunk_ids)
        qs = dict(zip(chunk_ids, q.chunk(n_local, 2)))
        kvs = dict(zip(chunk_ids, zip(k.chunk(n_local, 2), v.chunk(n_local, 2))))
        peer = (rank + 1) % world
        if world != 2:
            raise ValueError("the torch ring runs on 2 ranks")
        peer_ids = tuple(sorted({peer, 2 * world - 1 - peer}))
        if ring == "pass-kv":
            recv, reqs = exchange(torch.stack([k, v]), peer, group)
            parts = attend_chunks(qs, kvs)
            for r in reqs:
                r.wait()
            pk, pv = recv
            peer_kv = dict(zip(peer_ids, zip(pk.chunk(n_local, 2), pv.chunk(n_local, 2))))
            parts = {a: merge(parts[a], attend_chunks({a: qs[a]}, peer_kv)[a]) for a in chunk_ids}
        elif ring == "pass-q":
            recv, reqs = exchange(q, peer, group)
            parts = attend_chunks(qs, kvs)
            for r in reqs:
                r.wait()
            visiting = attend_chunks(dict(zip(peer_ids, recv.chunk(n_local, 2))), kvs)
            b, h, c, d = qs[chunk_ids[0]].shape
            zero = (
                torch.zeros(b, h, c, d, dtype=q.dtype, device=q.device),
                torch.full((b, h, c), -torch.inf, dtype=torch.float32, device=q.device),
            )
            send = torch.cat(
                [
                    torch.cat([o, lse.unsqueeze(-1).to(o.dtype)], -1)
                    for o, lse in (visiting[a] or zero for a in peer_ids)
                ],
                2,
            )
            back, reqs = exchange(send, peer, group)  # the final All2All of partial outputs
            for r in reqs:
                r.wait()
            for a, blob in zip(chunk_ids, back.chunk(n_local, 2)):
                part = (blob[..., :d], blob[..., d].float())
                parts[a] = merge(parts[a], part if torch.isfinite(part[1]).any() else None)
        else:
            raise ValueError(f"unknown ring {ring!r}")
        attn = torch.cat([parts[a][0].to(q.dtype) for a in chunk_ids], 2)
        return self._finish(x, attn)


class Stack(torch.nn.Module):
    def __init__(self, layers: int, hidden: int, ffn: int, heads: int, seed: int = 0):
        super().__init__()
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        self.layers = torch.nn.ModuleList(Layer(hidden, ffn, heads) for _ in range(layers))
        for p in self.parameters():
            p.data.mul_(0.5)
        torch.random.set_rng_state(gen_state)

    @torch.no_grad()
    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    @torch.no_grad()
    def forward_cp(self, x_local, chunk_ids, ring: str, rank: int, world: int, group=None):
        for layer in self.layers:
            x_local = layer.forward_cp(x_local, chunk_ids, ring, rank, world, group)
        return x_local


def load_balanced_chunks(rank: int, world: int) -> tuple[int, int]:
    """Chunks of a 2N-chunk sequence that CP rank `rank` holds: i and 2N-1-i."""
    return rank, 2 * world - 1 - rank


def shard(x, rank: int, world: int):
    """The local tokens of `x` [B, T, D] for `rank`, in chunk order."""
    chunks = x.chunk(2 * world, 1)
    return torch.cat([chunks[c] for c in load_balanced_chunks(rank, world)], 1)


def unshard(locals_by_rank: list, world: int):
    """Reassemble the full sequence from every rank's local tokens."""
    pieces = {}
    for rank, xl in enumerate(locals_by_rank):
        for c, part in zip(load_balanced_chunks(rank, world), xl.chunk(2, 1)):
            pieces[c] = part
    return torch.cat([pieces[c] for c in range(2 * world)], 1)
