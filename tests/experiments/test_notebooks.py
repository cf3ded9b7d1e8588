"""Every experiment notebook re-executes top to bottom in quick mode without an error."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "experiments" / "notebooks"
NAMES = ("cost_model_accuracy", "search_efficiency", "hw_codesign", "end_to_end",
         "regress_history", "quantization")


def test_the_notebooks_exist_with_outputs() -> None:
    for name in NAMES:
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        outs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        assert any("image/png" in o.get("data", {}) for o in outs), f"{name}: no figure saved"
        assert any(o.get("output_type") == "stream" and o.get("name") == "stdout" for o in outs)
        assert not any(o.get("output_type") == "error" for o in outs), name


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_in_quick_mode(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCHED_NB_QUICK", "1")
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()  # raises CellExecutionError when a cell fails
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not any(o.get("output_type") == "error" for o in outs)
    assert any("image/png" in o.get("data", {}) for o in outs), f"{name} drew no figure"
