"""The build: without hiredis or a compiler it falls back to the pure core, unless the C core is required."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "ext", tmp_path / "ext", ignore=shutil.ignore_patterns("*.c", "*.html"))
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return tmp_path


def _build(checkout: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("TURBOLOCK_REQUIRE_EXTENSIONS", "TURBOLOCK_NO_EXTENSIONS")}
    environment.update(env)
    command = [sys.executable, "setup.py", "build_ext", "--inplace"]
    return subprocess.run(command, cwd=checkout, env=environment, capture_output=True, text=True, timeout=300)


def _built(checkout: Path) -> list[Path]:
    return list((checkout / "src" / "turbolock").glob("_core_c*.so"))


def test_missing_hiredis_falls_back_with_a_warning(checkout: Path) -> None:
    done = _build(checkout, PKG_CONFIG_LIBDIR="/nonexistent", PKG_CONFIG_PATH="")
    assert done.returncode == 0, done.stderr
    assert "using the pure-Python core" in done.stderr
    assert "hiredis" in done.stderr
    assert _built(checkout) == []


def test_missing_hiredis_fails_when_the_c_core_is_required(checkout: Path) -> None:
    done = _build(checkout, PKG_CONFIG_LIBDIR="/nonexistent", PKG_CONFIG_PATH="",
                  TURBOLOCK_REQUIRE_EXTENSIONS="1")
    assert done.returncode != 0
    assert "TURBOLOCK_REQUIRE_EXTENSIONS=1 but the C core cannot be built" in done.stderr
    assert _built(checkout) == []


def test_a_broken_compiler_falls_back_or_fails_as_asked(checkout: Path) -> None:
    done = _build(checkout, CC="/bin/false", LDSHARED="/bin/false")
    assert done.returncode == 0, done.stderr
    assert "using the pure-Python core" in done.stderr
    assert _built(checkout) == []
    done = _build(checkout, CC="/bin/false", LDSHARED="/bin/false", TURBOLOCK_REQUIRE_EXTENSIONS="1")
    assert done.returncode != 0
    assert _built(checkout) == []


def test_no_extensions_skips_the_build(checkout: Path) -> None:
    done = _build(checkout, TURBOLOCK_NO_EXTENSIONS="1")
    assert done.returncode == 0, done.stderr
    assert _built(checkout) == []
