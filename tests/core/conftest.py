"""Fixtures giving the tests both cores: the compiled one (``c``) and the pure one (``py``).

Without the compiled core the ``c`` cases are skipped, unless TURBOLOCK_REQUIRE_EXTENSIONS=1
says it must be there, in which case they fail.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

from turbolock._wire import core_py as _core_py


def _sanitized() -> bool:
    """Whether AddressSanitizer is loaded in this process (scripts/sanitize runs the tests so)."""
    try:
        with open("/proc/self/maps") as maps:
            return "libasan" in maps.read()
    except OSError:
        return False


# Under the sanitizers only the compiled core's cases run (the pure core's use no C of ours for
# them to check), and what reads RSS is skipped: ASan keeps freed memory in quarantine.
SANITIZED = _sanitized()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rss: reads the process's resident memory (skipped under ASan)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if SANITIZED:
        skip = pytest.mark.skip(reason="ASan keeps freed memory in quarantine: RSS means nothing")
        for item in items:
            if item.get_closest_marker("rss"):
                item.add_marker(skip)


def extensions_required() -> bool:
    return os.environ.get("TURBOLOCK_REQUIRE_EXTENSIONS", "").strip().lower() not in ("", "0", "false", "no")


def _import_core_c() -> tuple[ModuleType | None, str]:
    try:
        return importlib.import_module("turbolock._core_c"), ""
    except ImportError as exc:
        return None, f"turbolock._core_c is not importable: {exc}"


_CORE_C, _CORE_C_MISSING = _import_core_c()


def _require_core_c() -> ModuleType:
    if _CORE_C is None:
        if extensions_required():
            pytest.fail(f"TURBOLOCK_REQUIRE_EXTENSIONS=1 but {_CORE_C_MISSING}")
        pytest.skip(_CORE_C_MISSING)
    return _CORE_C


@pytest.fixture(params=["c"] if SANITIZED else ["c", "py"], scope="session")
def core(request: pytest.FixtureRequest) -> ModuleType:
    """Each core in turn."""
    return _require_core_c() if request.param == "c" else _core_py


@pytest.fixture(scope="session")
def require_extensions() -> bool:
    """Whether TURBOLOCK_REQUIRE_EXTENSIONS=1 says the compiled core must be there."""
    return extensions_required()


@pytest.fixture(scope="session")
def core_c() -> ModuleType:
    """The compiled core, for tests that compare it with the pure one."""
    return _require_core_c()
