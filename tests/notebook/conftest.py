"""Run real notebooks: a Jupyter kernel (ipykernel) executed by nbclient, this checkout's vhd on its path."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_module

ROOT = Path(__file__).resolve().parents[2]


def run_notebook(cells: list[str], cwd: Path, timeout: int = 120) -> list[list[dict[str, Any]]]:
    """Execute code cells in a fresh kernel and return each cell's outputs (as nbformat dicts)."""
    need_module("nbclient", "pip install nbclient ipykernel nbformat (the test extra has them)")
    need_module("ipykernel", "pip install ipykernel")
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    env_path = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env_path  # the kernel is a child process: it imports this checkout's vhd
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(cwd)}},
            extra_arguments=[f"--IPKernelApp.exec_lines=import sys; sys.executable = {sys.executable!r}"],
        )
        client.execute()
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    return [[dict(o) for o in cell.outputs] for cell in nb.cells]


def html_of(outputs: list[dict[str, Any]]) -> str:
    """Every ``text/html`` a cell's outputs (displays and its value) carry, joined."""
    return "\n".join(o.get("data", {}).get("text/html", "") for o in outputs if "data" in o)


@pytest.fixture
def notebook() -> Any:
    return run_notebook
