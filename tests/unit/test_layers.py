"""The import layers hold (pyproject.toml's ``[tool.importlinter]``: every arrow points down,
no two-way tie between the layers), and a module that imports upward breaks them; the package
root stays readable (at most 12 modules)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

SRC = REPO / "src" / "mindscape"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint(src: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the package under `src` (a ``src/`` folder)."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_layers_hold() -> None:
    done = lint(SRC.parent)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_upward_import_breaks_them(tmp_path: Path) -> None:
    copy = tmp_path / "src" / "mindscape"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    types = copy / "memory" / "types.py"
    types.write_text(types.read_text() + "\nfrom mindscape.commands import common  # noqa\n")
    done = lint(copy.parent)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "mindscape.memory.types -> mindscape.commands.common" in done.stdout


def test_the_package_root_holds_at_most_12_modules() -> None:
    assert len(list(SRC.glob("*.py"))) <= 12
