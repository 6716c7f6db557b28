"""Notebooks are stored clean: no outputs, a Python kernel, Colab metadata, no machine paths."""

from __future__ import annotations

import json
import re

import pytest
from conftest import NOTEBOOKS

from tmm_course.teach.colab import INSTALL_TAG, install_cell_source

ids = [p.name for p in NOTEBOOKS]
MACHINE_PATH = re.compile(r"(/home/|/root/|/work/|/Users/|/tmp/|[A-Z]:\\\\)")


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def code_cells(notebook):
    return [c for c in notebook["cells"] if c["cell_type"] == "code"]


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_outputs_are_stripped(path):
    for cell in code_cells(load(path)):
        assert cell["outputs"] == [], f"{path.name}: a cell has outputs: {cell['source'][:1]}"
        assert cell["execution_count"] is None, f"{path.name}: a cell has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_cell_has_an_id_of_its_own(path):
    notebook = load(path)
    cells = notebook["cells"]  # nbformat 4.5 and later require them
    assert (notebook["nbformat"], notebook["nbformat_minor"]) >= (4, 5), path.name
    assert all(c.get("id") for c in cells), f"{path.name}: a cell has no id"
    assert len({c["id"] for c in cells}) == len(cells), f"{path.name}: two cells share an id"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_python_kernelspec_and_colab_gpu_runtime(path):
    meta = load(path)["metadata"]
    assert meta["kernelspec"]["name"] == "python3"
    assert meta["kernelspec"]["language"] == "python"
    assert meta["accelerator"] == "GPU"
    assert "gpuType" in meta["colab"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_first_code_cell_is_the_current_colab_install_cell(path):
    first = code_cells(load(path))[0]
    assert INSTALL_TAG in first["metadata"].get("tags", [])
    # collapsed in JupyterLab, a form with its title in Colab
    assert first["metadata"]["jupyter"]["source_hidden"] is True
    assert first["metadata"]["cellView"] == "form" and first["source"][0].startswith("# @title ")
    assert "".join(first["source"]) == install_cell_source(), (
        "install cell is stale: run `python -m tmm_course.teach.colab`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_machine_paths(path):
    text = path.read_text(encoding="utf-8")
    assert not MACHINE_PATH.search(text), f"{path.name} mentions a machine path"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_random_inputs_are_seeded(path):
    sources = ["".join(c["source"]) for c in code_cells(load(path))]
    for i, source in enumerate(sources):
        if re.search(r"torch\.(randn|rand|randint)\(", source):
            assert any("manual_seed" in s for s in sources[: i + 1]), (
                f"{path.name}: random inputs before any torch.manual_seed"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_tmm_course_is_imported_before_triton(path):
    joined = "\n".join("".join(c["source"]) for c in code_cells(load(path)))
    for later in ("import triton", "@triton.jit"):
        if later in joined:
            assert joined.index("import tmm_course") < joined.index(later), later


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_source_shown_is_displayed(path):
    """``show(kernel)`` returns the source to display: mid-cell, Jupyter drops it unseen."""
    for cell in code_cells(load(path)):
        lines = [line for line in "".join(cell["source"]).splitlines() if line.strip()]
        for line in lines[:-1]:
            assert not re.match(r"show(_diff)?\(", line), f"{path.name} {cell['id']}: {line}"
