"""The `dcsim` command line (contract in DESIGN.md).

    dcsim run SCENARIO.yaml [--set k=v ...] [--out DIR] [--json]
    dcsim check SCENARIO.yaml [--set k=v ...]
    dcsim schema
    dcsim hw list | dcsim hw show NAME

User errors (bad YAML, unknown keys, bad units, impossible values) print one line and exit 2.
"""
from __future__ import annotations

import argparse
import json
import sys

from sim.errors import ScenarioError

EXIT_USAGE = 2


def _table(title: str, rows: list[tuple[str, str]]) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)


def _fmt(key: str, value) -> str:
    from hardware_models.units import format_bytes, format_rate, format_seconds
    if isinstance(value, float):
        if key.endswith("_bytes_per_s"):
            return format_rate(value)
        if key.endswith("_bytes") or key == "bytes":
            return format_bytes(value)
        if key.endswith("_s"):
            return format_seconds(value)
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        text = json.dumps(value)
        return text if len(text) < 60 else f"({len(value)} entries)"
    return str(value)


def cmd_run(args) -> int:
    from sim.runner import run
    from sim.scenario import load_scenario
    scenario = load_scenario(args.scenario, args.set)
    result = run(scenario)
    if args.out:
        from sim.output import write_run
        write_run(result, args.out)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary))
        return 0
    rows = [(k, _fmt(k, v)) for k, v in result.metrics.items()]
    rows += [("sim_time_s", _fmt("sim_time_s", result.sim_time_s)), ("wall_s", f"{result.wall_s:.3f} s"),
             ("events", str(result.events))]
    _table(f"{scenario.name} ({scenario.workload.kind})", rows)
    if args.links:
        _links_table(result.links, args.links)
    if args.out:
        print(f"results written to {args.out}")
    return 0


def _links_table(links, top: int) -> None:
    from rich.console import Console
    from rich.table import Table

    from hardware_models.units import format_bytes, format_rate, format_seconds
    table = Table(title=f"busiest {top} links", header_style="bold")
    for col in ("link", "kind", "capacity", "bytes", "busy", "utilisation"):
        table.add_column(col, justify="left" if col in ("link", "kind") else "right")
    for row in links.sort_values(["utilisation", "link"], ascending=[False, True]).head(top).itertuples():
        table.add_row(row.link, row.kind, format_rate(row.capacity_bytes_per_s), format_bytes(row.bytes),
                      format_seconds(row.busy_s), f"{row.utilisation:.1%}")
    Console().print(table)


def cmd_check(args) -> int:
    from sim.scenario import load_scenario
    scenario = load_scenario(args.scenario, args.set)
    hw = scenario.hardware
    print(f"{args.scenario}: ok — {scenario.workload.kind} on {hw.nodes} x {hw.gpus_per_node} {hw.gpu.name}, "
          f"network {scenario.network_model} ({hw.topology.kind})")
    return 0


def cmd_schema(args) -> int:
    from sim.scenario import Scenario
    print(json.dumps(Scenario.model_json_schema(), indent=1))
    return 0


def cmd_hw(args) -> int:
    from hardware_models import catalog
    if args.hw_cmd == "list":
        for section in ("device", "link", "tier"):
            for name in catalog.names(section):
                spec = catalog.resolve(section, name)
                print(f"{section:7s} {name:20s} {spec.source}")
        return 0
    for section in ("device", "link", "tier"):
        if args.name in catalog.names(section):
            spec = catalog.resolve(section, args.name)
            print(json.dumps({"section": section, **spec.model_dump(mode="json")}, indent=2))
            return 0
    raise ScenarioError("unknown hardware name; see `dcsim hw list`", value=args.name)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dcsim", description="Discrete-event simulator of ML datacenters")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run one scenario")
    r.add_argument("scenario")
    r.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE")
    r.add_argument("--out", help="directory for summary.json, events, trace and plots")
    r.add_argument("--json", action="store_true", help="print exactly one JSON object")
    r.add_argument("--links", type=int, default=0, metavar="N", help="also print the N busiest links")
    r.set_defaults(func=cmd_run)
    c = sub.add_parser("check", help="validate a scenario without running it")
    c.add_argument("scenario")
    c.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE")
    c.set_defaults(func=cmd_check)
    s = sub.add_parser("schema", help="the scenario reference (JSON schema)")
    s.set_defaults(func=cmd_schema)
    h = sub.add_parser("hw", help="the hardware catalog")
    hs = h.add_subparsers(dest="hw_cmd", required=True)
    hs.add_parser("list")
    show = hs.add_parser("show")
    show.add_argument("name")
    h.set_defaults(func=cmd_hw)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except ScenarioError as err:
        print(f"dcsim: error: {err}", file=sys.stderr)
        code = EXIT_USAGE
    except KeyboardInterrupt:
        print("dcsim: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
