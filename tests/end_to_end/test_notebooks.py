"""Every notebook in notebooks/ runs top to bottom (nbclient, a fresh python3 kernel, cwd =
notebooks/) without errors and shows at least one figure, and the committed notebooks are exactly
what notebooks/build.py generates (so they are reviewed as Python, not JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
# 15-40 s each on a busy 2-core machine (nine ingestion runs; the validation report's stored records; the CP
# scaling sweep): the slow suite runs them, so the default suite stays under 10 minutes
SLOW = {"ingestion_sizing.ipynb", "validation_report.ipynb", "cp_scaling.ipynb"}


def _measured_records() -> bool:
    records = NOTEBOOKS.parent / "validation" / "records"
    return any(p.suffix in (".json", ".yaml", ".yml") and p.name != "published.yaml" for p in records.iterdir())


def _params():
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        marks = [pytest.mark.slow] if path.name in SLOW else []
        if path.name == "validation_report.ipynb" and not _measured_records():
            marks.append(pytest.mark.skip(reason="no measured records in validation/records/ to compare"))
        yield pytest.param(path, marks=marks, id=path.stem)


@pytest.mark.parametrize("path", _params())
def test_notebook_runs_top_to_bottom(path):
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "a study notebook shows plots"


def test_notebooks_are_generated_by_build_py(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_notebooks", NOTEBOOKS / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    generated = build.build(tmp_path)
    assert {p.name for p in generated} == {p.name for p in NOTEBOOKS.glob("*.ipynb")}
    for p in generated:
        fresh = json.loads(p.read_text())
        committed = json.loads((NOTEBOOKS / p.name).read_text())
        assert [c["source"] for c in committed["cells"]] == [c["source"] for c in fresh["cells"]], (
            f"{p.name} differs from notebooks/build.py: run python notebooks/build.py"
        )
        assert all(not c.get("outputs") for c in committed["cells"]), f"{p.name}: commit notebooks without outputs"
