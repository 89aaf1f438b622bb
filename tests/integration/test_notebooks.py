"""The notebooks run: each is executed top to bottom in a fresh kernel with nbclient.

The kernel is ipykernel's ``python3`` spec, which jupyter_client starts with this test's own
interpreter (the venv's python); `test_kernel_is_this_venv` checks that. Every notebook runs
with its working directory, its store (``MINDSCAPE_NOTEBOOK_STORE``) and its temp dir
(``TMPDIR``, where 03 builds its bench) inside the test's tmp_path, offline.

Notebook 02 runs twice: with the extractive backend, and with the default backend as a user
would get it (a `local_model` test): the local model (one or two answer calls, a few minutes
on two busy cores), which `require_local_model` asks for: under CI its absence fails the
test, locally it skips naming `make model`. ``MINDSCAPE_NOTEBOOK_TIMEOUT`` sets the per-cell
timeout in seconds (default 900).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import REPO, require_local_model

pytestmark = pytest.mark.integration

NOTEBOOKS = REPO / "notebooks"
NAMES = ("01_build_index.ipynb", "02_step_through.ipynb", "03_evaluate.ipynb")
CELL_TIMEOUT = int(os.environ.get("MINDSCAPE_NOTEBOOK_TIMEOUT", "900"))


@pytest.fixture
def notebook_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The kernel's environment (it inherits os.environ): offline, everything under tmp_path,
    and the default LLM backend (the suite's conftest pins it to extractive)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("MINDSCAPE_NOTEBOOK_STORE", str(tmp_path / "notebook-store"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.delenv("MINDSCAPE_LLM_BACKEND", raising=False)
    monkeypatch.delenv("MINDSCAPE_STORE", raising=False)
    return tmp_path


def execute(nb: Any, cwd: Path) -> Any:
    """Run every cell in a fresh python3 kernel with `cwd` as its working directory."""
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return nb


def run_notebook(name: str, cwd: Path) -> Any:
    return execute(nbformat.read(NOTEBOOKS / name, as_version=4), cwd)


def text_of(nb: Any) -> str:
    """Everything the code cells printed or displayed as text (stdout, results, markdown)."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                parts.append(out["text"])
            for mime in ("text/plain", "text/markdown"):
                if mime in out.get("data", {}):
                    parts.append(out["data"][mime])
    return "\n".join(parts)


def images_of(nb: Any) -> int:
    """How many PNG images the notebook displayed."""
    return sum("image/png" in out.get("data", {}) for c in nb.cells for out in c.get("outputs", []))


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_stripped_and_imports_only_the_package(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, name
            assert "sys.path" not in cell.source, name


def test_kernel_is_this_venv(notebook_env: Path) -> None:
    cell = nbformat.v4.new_code_cell("import sys\nprint(sys.prefix)\nprint(sys.executable)")
    nb = execute(nbformat.v4.new_notebook(cells=[cell]), notebook_env)
    prefix, executable = nb.cells[0].outputs[0]["text"].split()
    assert prefix == sys.prefix and executable == sys.executable


def test_01_builds_the_index_and_plots_its_structure(notebook_env: Path) -> None:
    nb = run_notebook("01_build_index.ipynb", notebook_env)
    text = text_of(nb)
    assert "'veridical': 34" in text and "chunk → window" in text
    assert images_of(nb) == 1
    assert (notebook_env / "notebook-store").is_dir()


@pytest.mark.parametrize(
    "backend",
    ["extractive", pytest.param("default", marks=pytest.mark.local_model)],
)
def test_02_steps_through_one_question(
    notebook_env: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Once with the extractive backend, once with the default a user gets (the local model
    when it is installed: a `local_model` test, left out of `make check`)."""
    from mindscape.llm import LLMSettings, resolve_backend

    if backend == "extractive":
        monkeypatch.setenv("MINDSCAPE_LLM_BACKEND", "extractive")
    else:  # the extractive run is the case above: this one is for the local model
        require_local_model()
    backend = resolve_backend(LLMSettings.from_env())[0]  # what the kernel resolves too
    nb = run_notebook("02_step_through.ipynb", notebook_env)
    text = text_of(nb)
    assert f"kernel: {sys.executable}" in text
    assert "init_signature(init_signature)" in text and "refine -.-> __end__;" in text
    assert f"answered by: {backend}" in text
    assert "━━ round 1" in text and "σ0 (activated by the question): " in text
    assert re.search(r"attempt: (['\"]).+\1  sufficient=(True|False)  confidence=\d\.\d\d", text)
    assert re.search(r"refine: (ANSWER|REFINE|STOP) ", text)
    cost = re.search(r"rounds: (\d)   LLM calls: (\d+)   input tokens: (\d+)", text)
    assert cost, text[-2000:]
    rounds, calls, tokens_in = map(int, cost.groups())
    assert 1 <= rounds <= 2
    if backend == "local":
        assert calls >= 1 and tokens_in > 0
    else:
        assert calls == 0 and tokens_in == 0
    answer = re.search(r"answer: +(.+)", text)
    print(f"02 answered by {backend}: {answer.group(1) if answer else '?'}; {cost.group(0)}")


def test_03_evaluates_and_plots(notebook_env: Path) -> None:
    nb = run_notebook("03_evaluate.ipynb", notebook_env)
    text = text_of(nb)
    assert "8 answers in" in text
    assert "## Quality" in text and "| naive |" in text and "| mindscape |" in text
    assert "## Cost" in text and "Recall@k" in text
    outs = list(notebook_env.glob("mindscape-eval-*/out"))
    assert len(outs) == 1 and (outs[0] / "report.json").is_file()
    pngs = sorted(p.name for p in outs[0].glob("*.png"))
    assert pngs == [
        "metrics_cinderella_demo.png",
        "quality_vs_calls.png",
        "recall_at_k_cinderella_demo.png",
    ]
    assert images_of(nb) == len(pngs)
