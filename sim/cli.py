"""The `dcsim` command line (contract: README.md, "Contracts").

    dcsim run SCENARIO.yaml [--set k=v ...] [--out DIR] [--json]
    dcsim check SCENARIO.yaml [--set k=v ...]
    dcsim plan SCENARIO.yaml [--set k=v ...] [--json]
    dcsim schema
    dcsim hw list | dcsim hw show NAME [--json]
    dcsim models [--json | --markdown]
    dcsim validate [--device cpu|cuda] [--quick] [--json] [--out DIR] [--compare RECORDS]
                   [--measured FILE [--scenario S.yaml]]
    dcsim sweep SCENARIO.yaml --grid k=v1,v2 [--zip k=v1,v2] [--workers N | --dask ADDRESS] --out DIR

User errors (bad YAML, unknown keys, bad units, impossible values) print one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from sim.errors import ScenarioError, check_output_dir

EXIT_USAGE = 2
LONG_RUN_S = 60.0  # `dcsim run` warns before a run estimated to take longer than this
SLOWEST_MACHINE = 4.0  # runs longer than LONG_RUN_S / this on the reference machine probe this one's speed


def long_run_warning(scenario, est, speed: float | None = None) -> str | None:
    """One line for stderr when the estimated wall time of `scenario` on this machine (`est`: its
    Estimate, the figure `dcsim check` prints, sim/scenario/estimate.py; `speed`: this machine's
    relative to the reference machine, probed when None and the run could be long) exceeds
    LONG_RUN_S; on the flow network it names the analytical one."""
    from hardware_models.units import format_duration
    from sim.scenario.estimate import machine_speed, wall_time_s

    if speed is None:
        if wall_time_s(est) <= LONG_RUN_S / SLOWEST_MACHINE:
            return None  # short even on a machine 4x slower than the reference: no probe (start-up)
        speed = machine_speed()
    seconds = wall_time_s(est, speed)
    if seconds <= LONG_RUN_S:
        return None
    text = (
        f"dcsim: this run is estimated to take ~{format_duration(seconds)} of wall time on this machine "
        "(dcsim check shows why)"
    )
    if scenario.network_model == "flow":
        text += (
            "; network_model: analytical (--set network_model=analytical) prices communication in closed "
            "form instead of simulating every flow, usually far faster"
        )
    return text


def cmd_run(args) -> int:
    from sim.runner import run
    from sim.scenario.model import load_scenario

    scenario = load_scenario(args.scenario, args.set)
    if args.out:
        check_output_dir(args.out)  # before the run: a long run must not end unable to write
    from sim.engine.progress import progress_enabled
    from sim.scenario.estimate import DEFAULT_LIMITS, enforce

    limits = None if args.no_limits else DEFAULT_LIMITS
    try:
        warning = long_run_warning(scenario, enforce(scenario, limits))  # a refused run says so instead
        if warning:
            print(warning, file=sys.stderr, flush=True)
        result = run(scenario, progress=progress_enabled(args.quiet or args.json), limits=limits)
    except ScenarioError as err:
        raise err.with_file(args.scenario) from None
    if args.out:
        from sim.report.output import write_run
        from sim.report.trace import parse_window

        write_run(result, args.out, trace_window_s=parse_window(args.trace_window))
    if args.json:
        print(json.dumps(result.summary()))
        return 0
    from sim.report.table import print_run

    print_run(result, links_top=args.links)
    if args.out:
        print(f"results written to {args.out}")
    return 0


def cmd_sweep(args) -> int:
    from sim.studies.sweep import sweep_command

    return sweep_command(args)


def cmd_validate(args) -> int:
    from validation.harness import main as validate_main  # lazy: dcsim works without torch

    return validate_main(args)


def cmd_check(args) -> int:
    from sim.scenario.model import load_scenario

    scenario = load_scenario(args.scenario, args.set)
    hw = scenario.hardware
    from sim.scenario.estimate import enforce, estimate_lines, machine_speed

    try:
        est = enforce(scenario)  # exit 2 with the estimate if `run` would refuse it
    except ScenarioError as err:
        raise err.with_file(args.scenario) from None
    print(
        f"{args.scenario}: ok — {scenario.kind} on {hw.nodes} x {hw.gpus_per_node} {hw.gpu.name}, "
        f"network {scenario.network_model} ({hw.topology.kind})"
    )
    for line in estimate_lines(est, machine_speed()):
        print(line)
    return 0


def cmd_plan(args) -> int:
    from sim.scenario.model import load_scenario
    from sim.workloads import WORKLOADS, Workload, workload_for

    scenario = load_scenario(args.scenario, args.set)
    kind = scenario.kind  # "multi" for several jobs: no plan
    report = workload_for(kind).plan_report(scenario) if scenario.workload is not None else None
    if report is None:  # the kinds that have a static plan (`Workload.plan_report`)
        planned = [w.kind for w in WORKLOADS if type(w).plan_report is not Workload.plan_report]
        raise ScenarioError(
            f"dcsim plan needs a workload with a static plan ({', '.join(planned)})", path="workload.kind", value=kind
        )
    if args.json:
        print(json.dumps(report["summary"]))
        return 0
    from rich.table import Table

    from sim.report.table import literal_console

    table = Table(title=report["title"], show_header=True, header_style="bold")
    for i, col in enumerate(report["columns"]):
        table.add_column(col, justify="left" if i < 5 else "right")
    for row in report["rows"]:
        table.add_row(*row)
    literal_console().print(table)
    for line in report["footer"]:
        print(line)
    return 0


def cmd_schema(args) -> int:
    if args.markdown:
        from sim.scenario.schema_doc import scenario_reference_markdown

        print(scenario_reference_markdown(), end="")
        return 0
    from sim.scenario.model import Scenario

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
            if args.json:
                print(json.dumps({"section": section, **spec.model_dump(mode="json")}, indent=2))
                return 0
            print(f"{spec.name} ({section}, {spec.kind}): {spec.source}")
            for line in spec_lines(spec):
                print(line)
            return 0
    raise ScenarioError("unknown hardware name; see `dcsim hw list`", value=args.name)


def spec_lines(spec, indent: str = "  ") -> list[str]:
    """A hardware spec as `key  value with unit  (what it is)` lines; nested specs indented below
    their key. Units come from the field's type (hardware_models/units.py: Bytes, Seconds, ...)."""
    from pydantic import BaseModel

    lines = []
    for name, field in type(spec).model_fields.items():
        value = getattr(spec, name)
        if name in ("name", "kind", "source") and indent == "  ":
            continue  # in the heading
        if isinstance(value, BaseModel):
            lines.append(f"{indent}{name}")
            lines += spec_lines(value, indent + "  ")
            continue
        text = _with_unit(value, _dimension(field), name)
        about = "" if isinstance(value, str) else _about(field.description or "")
        lines.append(f"{indent}{name:{max(1, 22 - len(indent))}s} {text}" + (f"   ({about})" if about else ""))
    return lines


def _about(description: str) -> str:
    """A field's description without what the unit now says ('bytes/s', ', W', ', s')."""
    words = [p.strip() for p in description.replace("; ", ", ").split(", ")]
    return "; ".join(w for w in words if w and w not in ("bytes", "bytes/s", "s", "W", "FLOP/s", "USD per hour"))


def _dimension(field) -> str | None:
    """'bytes', 'seconds', ... where the field's type is one of the unit types of hardware_models.units."""
    import typing

    from hardware_models import units

    by_validator = {
        id(meta): dim
        for dim, ann in (
            ("bytes", units.Bytes),
            ("bytes_per_s", units.BytesPerS),
            ("seconds", units.Seconds),
            ("flop_per_s", units.FlopPerS),
            ("watts", units.Watts),
        )
        for meta in ann.__metadata__
    }
    stack = [field.annotation, *field.metadata]
    while stack:
        item = stack.pop()
        if id(item) in by_validator:
            return by_validator[id(item)]
        stack += list(getattr(item, "__metadata__", ())) + list(typing.get_args(item))
    return None


def _with_unit(value, dimension: str | None, name: str) -> str:
    from hardware_models.units import format_in

    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if dimension is not None:
        return format_in(value, dimension)
    if name.endswith("price_per_hour"):
        return f"{value:.4g} USD/h"
    if abs(value) >= 1e4 and float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.4g}"


def cmd_models(args) -> int:
    from sim.models.presets import model_presets, models_markdown, params_text

    if args.markdown:
        print(models_markdown(), end="")
        return 0
    presets = model_presets()
    if args.json:
        print(json.dumps([p.as_dict() for p in presets], indent=1))
        return 0
    print("Model presets: a scenario writes `workload.model: NAME` (DLRM: `workload.dense`); docs/models.md")
    for p in presets:
        print(f"\n{p.name}  {p.kind}  ({p.key} in {p.workloads})")
        for label, text in (("size", params_text(p)), ("shape", p.shape), ("source", p.source)):
            print(f"  {label:7s}{text}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dcsim", description="Discrete-event simulator of ML datacenters")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run one scenario")
    r.add_argument("scenario")
    r.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE")
    r.add_argument("--out", help="directory for summary.json, events, trace and plots")
    r.add_argument("--json", action="store_true", help="print exactly one JSON object")
    r.add_argument("--links", type=int, default=0, metavar="N", help="also print the N busiest links")
    r.add_argument("--quiet", action="store_true", help="no progress bar (also off when stderr is not a terminal)")
    r.add_argument(
        "--no-limits",
        action="store_true",
        help="run even if the cost estimate exceeds the limits "
        "(sim/scenario/estimate.py: 8 GiB, 1e9 events or simulated flows)",
    )
    r.add_argument(
        "--trace-window",
        metavar="START:END",
        help="trace.json keeps spans starting in this "
        "simulated-time window, e.g. 0:2ms (cap on recorded spans: --set trace_limit=N)",
    )
    r.set_defaults(func=cmd_run)
    c = sub.add_parser("check", help="validate a scenario without running it")
    c.add_argument("scenario")
    c.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE")
    c.set_defaults(func=cmd_check)
    pl = sub.add_parser("plan", help="the static plan of a scenario's workload (the embedding sharding plan)")
    pl.add_argument("scenario")
    pl.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE")
    pl.add_argument("--json", action="store_true", help="print the plan summary as one JSON object")
    pl.set_defaults(func=cmd_plan)
    s = sub.add_parser("schema", help="the scenario reference (JSON schema)")
    s.add_argument("--markdown", action="store_true", help="the reference page (docs/scenario-reference.md)")
    s.set_defaults(func=cmd_schema)
    h = sub.add_parser("hw", help="the hardware catalog")
    hs = h.add_subparsers(dest="hw_cmd", required=True)
    hs.add_parser("list")
    show = hs.add_parser("show", help="one catalog entry, every quantity with its unit")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="the raw spec as JSON (SI base units)")
    h.set_defaults(func=cmd_hw)
    m = sub.add_parser("models", help="the model presets a scenario can name (LLMs, video DiTs, DLRM)")
    m.add_argument("--json", action="store_true", help="one JSON list")
    m.add_argument("--markdown", action="store_true", help="the docs page (docs/models.md)")
    m.set_defaults(func=cmd_models)
    w = sub.add_parser("sweep", help="many runs over a grid of overrides (parquet/csv table, resumable)")
    w.add_argument("scenario")
    w.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY.PATH=V1,V2,...",
        help="swept key; several --grid multiply (cartesian product)",
    )
    w.add_argument(
        "--zip",
        action="append",
        default=[],
        metavar="KEY.PATH=V1,V2,...",
        help="keys that advance together (equal lengths)",
    )
    w.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE", help="fixed override")
    w.add_argument("--workers", type=int, help="local processes (1: in this process; default: CPU count)")
    w.add_argument("--dask", metavar="tcp://HOST:PORT", help="dask.distributed scheduler, or 'local'")
    w.add_argument("--out", required=True, help="sweep directory (rerun into it to resume)")
    w.add_argument("--retry-failed", action="store_true", help="rerun points that ended with an error")
    w.add_argument(
        "--plot",
        action="append",
        default=[],
        metavar="METRIC",
        help="write METRIC-vs-KEY.png against the first swept key",
    )
    w.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    w.set_defaults(func=cmd_sweep)
    v = sub.add_parser("validate", help="measure real torch runs, calibrate on primitives, predict, compare")
    v.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    v.add_argument("--quick", action="store_true", help="small grids (about a minute)")
    v.add_argument("--json", action="store_true", help="print exactly one JSON object")
    v.add_argument("--out", help="directory for records, profiles, scenarios, report and scatter.png")
    v.add_argument("--compare", metavar="RECORDS", help="records file/folder measured elsewhere: compare, no measuring")
    v.add_argument(
        "--measured",
        metavar="FILE",
        help="a run you measured (torch.profiler trace JSON, nccl-tests output or CSV): compare it with the prediction",
    )
    v.add_argument("--scenario", metavar="SCENARIO.yaml", help="with --measured: the scenario that predicts that run")
    v.set_defaults(func=cmd_validate)
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
    except BrokenPipeError:  # `dcsim ... | head`: the reader left; nothing more to say
        sys.stderr.close()
        code = 0
    sys.exit(code)


def console() -> None:
    """The `dcsim` command (and `python -m sim.cli`): `main`, its output flushed, then the process
    ends without tearing down what the command built. A large run leaves millions of objects that
    the interpreter would free one by one on exit (2.2 s after a simulated minute of 400 ingestion
    workers, with the prompt not yet back); the operating system frees them at once. An unexpected
    error still ends in its traceback, through the interpreter's normal exit."""
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
        if isinstance(exit_.code, str):
            print(exit_.code, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that left, or a stream main closed
            pass
    os._exit(code)


if __name__ == "__main__":
    console()
