"""Read Chakra-style execution-graph JSON (one file per rank) into rank graphs (graph.py).

The accepted form is the JSON rendering of Chakra's execution trace (`et_def.proto`; what
`chakra_jsonizer` writes, or hand-written in the same shape):

    {"rank": 0,                                  # optional: else from the file name, else its position
     "nodes": [{"id": 7, "name": "aten::mm", "type": "COMP_NODE",      # or the enum number (4)
                "duration_micros": 120, "data_deps": [5], "ctrl_deps": [3],
                "inputs": {"shapes": [[64, 128], [128, 256]], "types": ["Tensor(float)", ...]},
                "attr": [{"name": "comm_type", "int64_val": 0}, {"name": "comm_size", "int64_val": 1048576},
                         {"name": "comm_src", ...}, {"name": "comm_dst", ...}, {"name": "is_cpu_op", "bool_val": false}]},
               ...]}

camelCase keys (`durationMicros`, `dataDeps`, `ctrlDeps`, `int64Val`; protobuf's JSON mapping, int64
values as strings) and `attrs` for `attr` are read too; `input_shapes` / `input_types` (PyTorch
execution-trace style) stand in for `inputs`.

Node types: COMP_NODE (4) -> an `op` on the rank's `compute` track (a modelled category when its
name and shapes allow, ops.py; else measured), or on its `cpu` track when `is_cpu_op`;
COMM_COLL_NODE (7) -> a `collective` on the `comm` track (comm_type: ALL_REDUCE 0, REDUCE 1,
ALL_GATHER 2, GATHER 3, SCATTER 4, BROADCAST 5, ALL_TO_ALL 6, REDUCE_SCATTER 7, REDUCE_SCATTER_BLOCK 8,
BARRIER 9; comm_size in bytes); COMM_SEND_NODE (5) / COMM_RECV_NODE (6) -> `send`/`recv` with
comm_dst / comm_src. Ignored (listed by `ignored`): METADATA_NODE, MEM_LOAD/STORE_NODE (no memory
model of the host here), unknown types. Dependencies: data_deps and ctrl_deps between nodes of the
file (deps on ignored nodes pass through to theirs). Each track runs its nodes in a topological
order of the graph that keeps recorded ids where it can.
"""

from __future__ import annotations

import heapq
import re
from pathlib import Path

from sim.errors import ScenarioError
from sim.workloads.trace_replay.graph import Node, RankGraph
from sim.workloads.trace_replay.ops import MODELLED, CollectiveCall, OpRecord, category

NODE_TYPES = {1: "METADATA_NODE", 2: "MEM_LOAD_NODE", 3: "MEM_STORE_NODE", 4: "COMP_NODE"}
NODE_TYPES.update({5: "COMM_SEND_NODE", 6: "COMM_RECV_NODE", 7: "COMM_COLL_NODE"})
COMM_TYPES = {0: "all_reduce", 1: "reduce", 2: "all_gather", 3: "all_gather", 4: "reduce_scatter", 5: "broadcast"}
COMM_TYPES.update({6: "all_to_all", 7: "reduce_scatter", 8: "reduce_scatter", 9: "barrier"})
COMM_NAMES = {name.upper(): i for i, name in COMM_TYPES.items()}
COMM_NAMES.update({"GATHER": 3, "SCATTER": 4, "REDUCE_SCATTER_BLOCK": 8})
CHAKRA_RANK_RE = re.compile(r"(?:rank|\.)[_-]?(\d+)\.(?:et\.)?json", re.IGNORECASE)


def is_chakra(data) -> bool:
    return isinstance(data, dict) and isinstance(data.get("nodes"), list)


def _get(d: dict, *keys, default=None):
    for k in keys:
        if k in d:
            return d[k]
    return default


def _attrs(node: dict) -> dict:
    out = {}
    for a in _get(node, "attr", "attrs", default=[]) or []:
        if not isinstance(a, dict) or "name" not in a:
            continue
        value = next((v for k, v in a.items() if k != "name" and (k.lower().endswith("val") or k == "value")), None)
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
            value = int(value)
        out[a["name"]] = value
    return out


def _record(node: dict) -> OpRecord:
    inputs = node.get("inputs") if isinstance(node.get("inputs"), dict) else {}
    shapes = _get(inputs, "shapes", default=None) or node.get("input_shapes") or []
    types = _get(inputs, "types", default=None) or node.get("input_types") or []
    types = [re.sub(r"^Tensor\((.*)\)$", r"\1", t) if isinstance(t, str) else "" for t in types]
    return OpRecord(str(node.get("name", "")), tuple(shapes), tuple(types), ())


def _deps(node: dict) -> list[int]:
    out = []
    for key in ("data_deps", "dataDeps", "ctrl_deps", "ctrlDeps"):
        v = node.get(key)
        out += [int(x) for x in v] if isinstance(v, list) else ([int(v)] if isinstance(v, (int, str)) else [])
    return out


def parse(data: dict, source: str = "", default_rank: int = 0) -> tuple[RankGraph, list[str]]:
    """One rank's graph and the names of the nodes it ignored."""
    rank = int(data.get("rank", default_rank))
    raw = {int(n["id"]): n for n in data["nodes"] if isinstance(n, dict) and "id" in n}
    kept: dict[int, Node] = {}
    ignored: list[str] = []
    for nid, n in raw.items():
        ntype = n.get("type", "COMP_NODE")
        ntype = NODE_TYPES.get(int(ntype), "?") if isinstance(ntype, (int, float)) or str(ntype).isdigit() else ntype
        a = _attrs(n)
        name = str(n.get("name", f"node{nid}"))
        measured = float(_get(n, "duration_micros", "durationMicros", default=0) or 0) * 1e-6
        if ntype == "COMP_NODE":
            rec = _record(n)
            cat = category(rec)
            track = "cpu" if a.get("is_cpu_op") else "compute"
            kind = "op" if cat in MODELLED else "busy"
            kept[nid] = Node(nid, track, kind, name, cat if kind == "op" else "other", measured, op=rec)
        elif ntype in ("COMM_COLL_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE"):
            size = float(a.get("comm_size") or 0)
            if ntype == "COMM_COLL_NODE":
                ct = a.get("comm_type", 0)
                op = COMM_TYPES.get(COMM_NAMES.get(str(ct).upper(), ct) if isinstance(ct, str) else int(ct))
                if op is None:
                    ignored.append(name)
                    continue
                kept[nid] = Node(nid, "comm", "collective", name, "collective", measured, call=CollectiveCall(op, size))
            else:
                send = ntype == "COMM_SEND_NODE"
                peer = a.get("comm_dst" if send else "comm_src")
                kept[nid] = Node(
                    nid, "comm", "send" if send else "recv", name, "collective", measured,
                    call=CollectiveCall("send_recv", size), peer=None if peer is None else int(peer),
                )  # fmt: skip
        else:
            ignored.append(name)
    deps = {nid: _deps(n) for nid, n in raw.items()}

    def kept_deps(nid: int, seen: set[int]) -> set[int]:
        out: set[int] = set()
        for d in deps.get(nid, []):
            if d in seen or d not in raw:
                continue
            seen.add(d)
            out |= {d} if d in kept else kept_deps(d, seen)
        return out

    for nid, node in kept.items():
        node.deps = sorted(kept_deps(nid, set()))
    order = _topological(kept)
    nodes = []
    for i, nid in enumerate(order):
        node = kept[nid]
        node.measured_start_s = float(i)  # recorded order stands in for start times
        nodes.append(node)
    index = {n.id: i for i, n in enumerate(nodes)}
    for n in nodes:  # renumber to positions (ids must index the rank's node list)
        n.deps = [index[d] for d in n.deps]
    for i, n in enumerate(nodes):
        n.id = i
    return RankGraph(rank, nodes, {}, source), ignored


def _topological(nodes: dict[int, Node]) -> list[int]:
    waiting = {nid: len(n.deps) for nid, n in nodes.items()}
    users: dict[int, list[int]] = {}
    for nid, n in nodes.items():
        for d in n.deps:
            users.setdefault(d, []).append(nid)
    ready = [nid for nid, w in waiting.items() if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        nid = heapq.heappop(ready)
        order.append(nid)
        for u in users.get(nid, []):
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        raise ScenarioError("the execution graph has a dependency cycle", path="workload.trace", value=len(nodes))
    return order


def rank_from_name(path: Path) -> int | None:
    m = CHAKRA_RANK_RE.search(path.name)
    return int(m.group(1)) if m else None
