"""Declares the optional Cython extension ``turbolock._core_c`` (linked against hiredis).

By default hiredis is the system's, found with ``pkg-config hiredis`` and linked dynamically.
Without a compiler, Cython or libhiredis the install falls back to the pure-Python core and
prints why. ``TURBOLOCK_REQUIRE_EXTENSIONS=1`` turns that fallback into a failure (CI sets it);
``TURBOLOCK_NO_EXTENSIONS=1`` skips the extension altogether.

``TURBOLOCK_BUNDLED_HIREDIS=1`` compiles the bundled hiredis 0.14.1 reader (``vendor/hiredis``)
into the extension instead, with its symbols hidden: no pkg-config or libhiredis needed, and
the wheel runs its C core on machines without libhiredis. Release wheels are built so
(``[tool.cibuildwheel]`` in pyproject.toml).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


REQUIRE = _flag("TURBOLOCK_REQUIRE_EXTENSIONS")
SKIP = _flag("TURBOLOCK_NO_EXTENSIONS")
BUNDLED = _flag("TURBOLOCK_BUNDLED_HIREDIS")
BUNDLED_DIR = "vendor/hiredis"


def _pkg_config(*args: str) -> list[str]:
    out = subprocess.run(["pkg-config", *args, "hiredis"], check=True, capture_output=True, text=True)
    return shlex.split(out.stdout)


def _fail_or_warn(why: str) -> None:
    message = f"turbolock: the C core was not built ({why}); using the pure-Python core"
    if REQUIRE:
        raise SystemExit(f"turbolock: TURBOLOCK_REQUIRE_EXTENSIONS=1 but the C core cannot be built: {why}")
    print("*" * 75, file=sys.stderr)
    print(message, file=sys.stderr)
    print("*" * 75, file=sys.stderr)


def _extensions() -> list[Extension]:
    if SKIP:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        _fail_or_warn("Cython is not installed")
        return []
    sources = ["ext/_core_c.pyx"]
    if BUNDLED:
        sources += [f"{BUNDLED_DIR}/read.c", f"{BUNDLED_DIR}/sds.c"]
        # Hidden, so a libhiredis of another version loaded into the process cannot take
        # over these calls (the module's init function stays exported).
        cflags = [f"-I{BUNDLED_DIR}", "-D_FILE_OFFSET_BITS=64", "-fvisibility=hidden"]
        libs: list[str] = []
    else:
        try:
            cflags = _pkg_config("--cflags")
            libs = _pkg_config("--libs")
        except (OSError, subprocess.CalledProcessError):
            _fail_or_warn("pkg-config cannot find hiredis (apt-get install libhiredis-dev pkg-config)")
            return []
    debug = _flag("TURBOLOCK_DEBUG")
    ext = Extension(
        "turbolock._core_c",
        sources=sources,
        extra_compile_args=[*cflags, "-O2", *(["-O0", "-g"] if debug else [])],
        extra_link_args=libs,
    )
    return cythonize(
        [ext],
        language_level=3,
        compile_time_env={"DEBUG": debug},
        compiler_directives={"boundscheck": debug, "wraparound": debug, "cdivision": True},
    )


class OptionalBuildExt(build_ext):
    """Falls back to the pure core on a failed compile unless the extension is required."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means "fall back or fail"
            self._fallback(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._fallback(exc)

    def _fallback(self, exc: Exception) -> None:
        if REQUIRE:
            raise
        _fail_or_warn(f"{type(exc).__name__}: {exc}")


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
