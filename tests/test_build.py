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


def test_the_sdist_builds_a_wheel_that_runs_the_c_core(checkout: Path,
                                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    # What a release does: an sdist from the checkout, a wheel built from that sdist alone (so
    # the sdist must carry the Cython sources), the wheel installed apart from src/; the core
    # tests then run on the installed package and its compiled core.
    shutil.copy(ROOT / "MANIFEST.in", checkout / "MANIFEST.in")
    out = tmp_path_factory.mktemp("dist")
    environment = {**os.environ, "TURBOLOCK_REQUIRE_EXTENSIONS": "1"}
    sdist = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(out)], cwd=checkout,
                           env=environment, capture_output=True, text=True, timeout=300)
    assert sdist.returncode == 0, sdist.stderr
    (archive,) = out.glob("turbolock-*.tar.gz")
    wheel = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--wheel-dir", str(out), str(archive)], env=environment, capture_output=True,
                           text=True, timeout=600)
    assert wheel.returncode == 0, wheel.stderr[-2000:]
    (built,) = out.glob("turbolock-*.whl")
    site = tmp_path_factory.mktemp("site")
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                                str(site), str(built)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    run_env = {**environment, "PYTHONPATH": str(site)}
    probe = subprocess.run([sys.executable, "-c", "import turbolock; print(turbolock.__file__, "
                            "turbolock.implementation)"], cwd=site, env=run_env, capture_output=True,
                           text=True, timeout=60)
    location, implementation = probe.stdout.split()
    assert location.startswith(str(site)) and implementation == "c", probe.stdout + probe.stderr
    core_tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                                 str(ROOT / "tests" / "core")], cwd=site, env=run_env, capture_output=True,
                                text=True, timeout=600)
    assert core_tests.returncode == 0, core_tests.stdout[-3000:]
    assert " passed" in core_tests.stdout
