"""Input generators (hypothesis strategies) for benchmarks/fuzz.py: odd values, mutations of shipped
scenarios and records, YAML texts, `--set` texts, topology graph files, page-access traces and
damaged sweep records. See benchmarks/fuzz.py for what each entry point does with them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
SPECIAL = [
    "",
    "0",
    "-1",
    "1e400",
    "nan",
    "inf",
    "-inf",
    "1 GiB",
    "-3 GiB",
    "0 B",
    "400 Gbit/s",
    "2 us",
    "5 ms",
    "1 parsec",
    "1e30 TFLOP/s",
    "GiB",
    "1 GiB/s/s",
    "700 W",
    "54 day",
    "auto",
    "all",
    "ring",
    "tree",
    "direct",
    "hierarchical",
    "flow",
    "analytical",
    "h100-sxm",
    "nvlink4",
    "cx7-400g-rdma",
    "hdd",
    "ddr5-host",
    "x.yaml",
    "../../nope.yaml",
    "/dev/zero.yaml",
    "0-3",
    "3-1",
    "0-",
    "!!python/object:os.system",
    "collective",
    "cp_inference",
    "embedding_training",
    "ingestion",
    "training_campaign",
    "graph",
    "fat-tree",
    "clos3",
    "torus",
    "young-daly",
    "pass-kv",
    "recshard",
    "manual",
    "fp8",
    "int4",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**66), 2**66),
    st.integers(-3, 64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(SPECIAL),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(SPECIAL) | st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def shipped(names: list[str] | None = None) -> dict[str, dict]:
    paths = sorted((ROOT / "scenarios").glob("*.yaml"))
    return {p.stem: yaml.safe_load(p.read_text()) for p in paths if names is None or p.stem in names}


def _slots(node: Any, out: list) -> list:
    """(container, key) of every value inside `node` (dict keys and list indices)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        out.append((node, key))
        _slots(value, out)
    return out


@st.composite
def mutated(draw, base: dict, max_edits: int = 4) -> dict:
    """`base` with 1..max_edits random edits (see module docstring)."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, max_edits]))):
        slots = _slots(data, [(None, None)])
        container, key = draw(st.sampled_from(slots))
        op = draw(st.sampled_from(["set", "delete", "add", "wrap", "empty", "swap"] + ["tweak"] * 10))
        if container is None or op == "add":  # a new key in the dict at (or holding) the slot
            value = data if container is None else container[key]
            target = value if isinstance(value, dict) else container if isinstance(container, dict) else data
            target[draw(st.sampled_from(SPECIAL[:20]) | st.text(min_size=1, max_size=8))] = draw(VALUES)
        elif op == "delete":
            del container[key]
        elif op == "wrap":
            container[key] = [container[key]] if draw(st.booleans()) else {"x": container[key]}
        elif op == "empty":
            container[key] = [] if isinstance(container[key], list) else {}
        elif op == "swap":  # a value found elsewhere in the document
            other, other_key = draw(st.sampled_from(slots[1:]))
            container[key] = copy.deepcopy(other[other_key])
        elif op == "tweak" and isinstance(container[key], (int, float)) and not isinstance(container[key], bool):
            v = container[key]  # plausible: the same number, scaled or nudged
            container[key] = draw(st.sampled_from([v * 2, v / 2, v * 10, v + 1, v - 1, 0, -v, 1, v * 1e6]))
            if isinstance(v, int):
                container[key] = int(container[key])
        elif op == "tweak" and isinstance(container[key], str) and container[key][:1].isdigit():
            number, _, unit = container[key].partition(" ")  # "256 MiB" -> "512 MiB", "0 MiB", ...
            scale = draw(st.sampled_from(["2*", "0.5*", "10*", "0*", "-1*", "1e6*"]))
            try:
                container[key] = f"{float(scale[:-1]) * float(number.replace('_', '')):g} {unit}".strip()
            except ValueError:
                container[key] = draw(st.sampled_from(SPECIAL))
        elif op == "tweak":
            container[key] = draw(st.sampled_from(SPECIAL))
        else:
            container[key] = draw(VALUES)
    return data


@st.composite
def scenario_inputs(draw, bases: dict[str, dict]):
    name = draw(st.sampled_from(sorted(bases)))
    return name, draw(mutated(bases[name]))


def schema_keys() -> list[str]:
    from sim.scenario.model import Scenario

    keys: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            keys.update(k for k in node.get("properties", {}))
            keys.update(str(v) for v in node.get("enum", []) if isinstance(v, str))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(Scenario.model_json_schema())
    return sorted(keys)


@st.composite
def yaml_texts(draw, bases: dict[str, dict], keys: list[str]) -> str:
    """A shipped scenario's YAML with character edits, or a random document from schema keys."""
    if draw(st.booleans()):
        text = yaml.safe_dump(bases[draw(st.sampled_from(sorted(bases)))], sort_keys=False)
        for _ in range(draw(st.integers(1, 5))):
            i = draw(st.integers(0, len(text)))
            j = min(len(text), i + draw(st.integers(0, 8)))
            text = text[:i] + draw(st.text(alphabet="{}[]:,-#&*!|>'\"%@`\t\n ab01.", max_size=6)) + text[j:]
        return text
    doc = st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(keys), inner, max_size=4),
        max_leaves=12,
    )
    data = {
        "name": "fuzz",
        "hardware": draw(doc),
        "workload": draw(st.dictionaries(st.sampled_from(keys), doc, max_size=4)),
    }
    if draw(st.booleans()):
        data["workload"]["kind"] = draw(st.sampled_from(SPECIAL[-14:-9]))
    return yaml.safe_dump(data)


def override_texts(bases: dict[str, dict]):
    paths = sorted({".".join(str(p) for p in path) for b in bases.values() for path in _key_paths(b)})
    structured = st.builds(
        lambda k, v: f"{k}={v}",
        st.sampled_from(paths) | st.text(max_size=10),
        st.sampled_from(SPECIAL)
        | st.text(max_size=10)
        | VALUES.map(lambda v: yaml.safe_dump(v, default_flow_style=True).strip()),
    )
    return structured | st.text(max_size=30)


def _key_paths(node, prefix=()):
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield (*prefix, key)
        yield from _key_paths(value, (*prefix, key))


@st.composite
def record_files(draw) -> tuple[str, str]:
    """(suffix, text): a few shipped records (+ meta) mutated, as JSON or YAML."""
    full = json.loads((ROOT / "validation/records/intel-xeon-processor-1t-full.json").read_text())
    picks = draw(st.lists(st.integers(0, len(full["records"]) - 1), min_size=1, max_size=6, unique=True))
    data = draw(mutated({"meta": full["meta"], "records": [full["records"][i] for i in picks]}, max_edits=3))
    suffix = draw(st.sampled_from([".json", ".yaml"]))
    text = json.dumps(data) if suffix == ".json" else yaml.safe_dump(data)
    return suffix, text


TOKENS = [
    "s0",
    "s1",
    "s2",
    "h0",
    "h1",
    "h2",
    "h3",
    "#",
    "100Gbit/s",
    "1e9",
    "-5",
    "0",
    "nan",
    "fast",
    "1us",
    "2_ms",
    "-1us",
    "400 Gbit/s",
    "x",
]


@st.composite
def graph_files(draw) -> tuple[str, str, dict]:
    """(suffix, text, hardware overrides): a valid fabric (hosts h* on switches s*, switches chained)
    as an edge list or GraphML, then token or character edits."""
    nodes, gpn, switches = draw(st.integers(2, 4)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
    bandwidth = st.sampled_from(["100Gbit/s", "400_Gbit/s", "1e9", "50000000000"])
    edges = [[f"h{h}", f"s{h % switches}", draw(bandwidth)] for h in range(nodes)]
    edges += [
        [f"s{k}", f"s{k + 1}", draw(bandwidth), draw(st.sampled_from(["1us", "500_ns"]))] for k in range(switches - 1)
    ]
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):  # token edits: replace, drop or add a line
        op = draw(st.sampled_from(["replace", "drop", "add"]))
        if op == "add" or not edges:
            edges.append(draw(st.lists(st.sampled_from(TOKENS), max_size=5)))
        elif op == "drop":
            edges.pop(draw(st.integers(0, len(edges) - 1)))
        else:
            line = edges[draw(st.integers(0, len(edges) - 1))]
            if line:
                line[draw(st.integers(0, len(line) - 1))] = draw(st.sampled_from(TOKENS) | st.text(max_size=5))
    hw = {"nodes": nodes, "gpus_per_node": gpn}
    if draw(st.integers(0, 3)) == 0:
        hw["hosts"] = draw(st.lists(st.sampled_from(TOKENS[:7]), max_size=5))
    if draw(st.booleans()):
        import networkx as nx

        g = nx.Graph()
        for e in edges:
            if len(e) >= 3:
                g.add_edge(e[0], e[1], bandwidth=e[2], **({"latency": e[3]} if len(e) > 3 else {}))
        text = "\n".join(nx.generate_graphml(g))
        for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
            i = draw(st.integers(0, len(text)))
            text = text[:i] + draw(st.text(alphabet='<>/"= abc', max_size=4)) + text[i + draw(st.integers(0, 5)) :]
        return ".graphml", text, hw
    return ".txt", "\n".join(" ".join(e) for e in edges), hw


@st.composite
def trace_files(draw) -> tuple[str, dict]:
    """(CSV text, tiered_memory overrides): page,count rows with odd tokens, headers and comments."""
    header = draw(
        st.sampled_from(["page,count"] * 6 + ["page", "count,page", "page, count", "pages,count", "", "page,count,x"])
    )
    odd = st.sampled_from(
        [
            "",
            "1e30",
            "-1",
            "2.5",
            "nan",
            "x",
            "#",
            '"3"',
            " 7 ",
            "99999999999999999999",
            "0x10",
            "1_000",
            "1,2,3",
            "4 # note",
        ]
    )
    valid = st.builds(lambda p, c: f"{p},{c}" if c else str(p), st.integers(0, 2000), st.integers(0, 50))
    rows = draw(st.lists(st.one_of(*[valid] * 7, odd, st.lists(odd | valid, max_size=3).map(",".join)), max_size=12))
    text = "\n".join([header, *rows]) + draw(st.sampled_from(["", "\n", "\n# end\n", "\r\n"]))
    workload = {
        "footprint": draw(st.sampled_from([None, "4 MiB", "64 KiB", "1 GiB"])),
        "epoch_accesses": draw(st.sampled_from([1, 1000, 10_000_000])),
    }
    return text, workload


def sweep_texts():
    """JSON texts for a sweep's point record: odd documents and mutated well-formed records."""
    record = {"point": "x", "overrides": {}, "status": "ok", "error": "", "wall_s": 0.1, "summary": None}
    return VALUES.map(json.dumps) | mutated(record).map(json.dumps) | st.text(max_size=40)
