"""The layers of ``pyproject.toml`` ([tool.importlinter]) hold for the package as it is, and
import-linter does catch a lower layer importing a higher one, or a cycle between siblings: run
on a copy of the package with one such import added, it must fail and name it (the negative
controls without which a passing contract would prove nothing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import turbolock

PACKAGE = Path(turbolock.__file__).parent
PYPROJECT = PACKAGE.parent.parent / "pyproject.toml"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists() or not PYPROJECT.exists(),
                                reason="lint-imports (the test extra) or pyproject.toml is not here")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports over the package found first on PYTHONPATH (``tree``), with the repo's contracts."""
    shutil.copy(PYPROJECT, tree / "pyproject.toml")
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(tree / "pyproject.toml")],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def _copy_with(tmp_path: Path, module: str = "", added_import: str = "") -> Path:
    """A copy of the package, with ``added_import`` at the end of ``module`` (a path inside it)."""
    shutil.copytree(PACKAGE, tmp_path / "src" / "turbolock",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"))
    if module:
        target = tmp_path / "src" / "turbolock" / module
        target.write_text(target.read_text() + f"\n{added_import}\n")
    return tmp_path


def test_the_package_keeps_its_layers(tmp_path: Path) -> None:
    result = _lint(_copy_with(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_a_lower_layer_importing_a_higher_one_is_caught(tmp_path: Path) -> None:
    # The wire core reaching up to a front end: the layering this project forbids.
    result = _lint(_copy_with(tmp_path, "_wire/validate.py", "import turbolock.client"))
    assert result.returncode != 0
    assert "Layers: front ends over drivers over flows over the wire core BROKEN" in result.stdout
    assert "turbolock._wire is not allowed to import turbolock.client" in result.stdout
    assert "turbolock._wire.validate -> turbolock.client" in result.stdout


def test_a_cycle_between_siblings_is_caught(tmp_path: Path) -> None:
    # lock_rules is imported by lock_flows; importing it back makes a cycle within _flows.
    result = _lint(_copy_with(tmp_path, "_flows/lock_rules.py", "import turbolock._flows.lock_flows"))
    assert result.returncode != 0
    assert "Contracts: 1 kept, 1 broken." in result.stdout
    assert "No import cycles between the modules of a package BROKEN" in result.stdout
    assert ".lock_rules -> .lock_flows" in result.stdout
