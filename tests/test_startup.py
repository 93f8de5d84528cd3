"""Start-up (issue 26): a command imports what it needs and no more.

`import sim`, `import sim.cli` and `dcsim --help` load no heavy library (pandas, matplotlib, scipy,
dask, torch, pint, numba) and no workload package; a scenario loads the package of its own kind only,
and running a small one, report included, needs no pandas, pyarrow, matplotlib, scipy, dask, torch,
networkx or numba (the bottleneck report computes on the recorder's columns, sim/report/columns.py;
routing works on the link arrays; networkx only for a graph file or a `graph` view; its fillings are
small enough for plain Python, so the compiled filling's numba is not loaded). Each check runs in a fresh
interpreter (a subprocess) and reads its `sys.modules`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLREDUCE = str(ROOT / "scenarios" / "allreduce-2x8-h100.yaml")
FAT_TREE = str(ROOT / "scenarios" / "alltoall-fattree-oversub.yaml")  # 2:1 leaf-spine: switch paths
HEAVY = ("pandas", "matplotlib", "scipy", "dask", "torch", "pint", "networkx", "pyarrow", "rich", "numba")
# modules inside packages a run needs that it does not: numpy.ma (numpy 2's `unique` imports it on its
# first call, 10-20 ms: sim.engine.codes.distinct sorts instead) and rich's emoji table (11 ms: the
# tables print text as it is, sim.report.table.literal_console)
UNNEEDED = ("numpy.ma", "rich._emoji_codes")


def loaded_after(code: str, cache_dir: Path | None = None) -> set[str]:
    """Top-level packages, sim.workloads.* modules and those of UNNEEDED in sys.modules after running
    `code` in a fresh interpreter."""
    probe = (
        f"{code}\nimport sys, json\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} "
        f"| {{m for m in sys.modules if m.startswith('sim.workloads.') or m in {UNNEEDED!r}}})))"
    )
    env = {**os.environ, **({"DCSIM_CACHE_DIR": str(cache_dir)} if cache_dir else {})}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _kinds_loaded(modules: set[str]) -> set[str]:
    return {m.split(".")[2] for m in modules if m.count(".") >= 2 and m.split(".")[2] not in ("base", "kind_union")}


@pytest.mark.parametrize(
    "code",
    [
        "import sim",
        "import sim.cli",
        "from sim.cli import build_parser\ntry:\n    build_parser().parse_args(['--help'])\nexcept SystemExit:\n    pass",
        "from sim.cli import build_parser\ntry:\n    build_parser().parse_args(['run', '--help'])\nexcept SystemExit:\n    pass",
    ],
    ids=["import sim", "import sim.cli", "dcsim --help", "dcsim run --help"],
)
def test_the_cli_and_the_package_import_nothing_heavy(code):
    loaded = loaded_after(code)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert not _kinds_loaded(loaded)
    assert "numpy" not in loaded and "pydantic" not in loaded  # argparse is all --help needs


def test_loading_a_scenario_imports_its_own_kind_only():
    loaded = loaded_after(f"from sim import load_scenario\nload_scenario({ALLREDUCE!r})")
    assert _kinds_loaded(loaded) == {"collective"}
    assert not loaded & {"matplotlib", "scipy", "dask", "torch", "networkx", "pandas", "pyarrow"}


@pytest.mark.parametrize("scenario", [ALLREDUCE, FAT_TREE], ids=["single switch", "fat-tree"])
def test_a_small_run_and_its_report_need_no_pandas_plotting_scipy_dask_torch_pint_or_networkx(tmp_path, scenario):
    """On a switched fabric too: its switch paths come from hop distances searched in numpy."""
    run = (
        "import io, contextlib\nfrom sim.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main(['run', {scenario!r}])\n"
        "    except SystemExit:\n"
        "        pass"
    )
    loaded_after(run, tmp_path)  # the first run asks pint for the units' factors and remembers them
    loaded = loaded_after(run, tmp_path)
    assert not loaded & {"pandas", "pyarrow", "matplotlib", "scipy", "dask", "torch", "pint", "networkx", "numba"}
    assert not loaded & set(UNNEEDED)
    assert _kinds_loaded(loaded) == {"collective"}
