"""Picks the core: the compiled ``_core_c`` when it imports, else the pure-Python ``_core_py``.

``TURBOLOCK_NO_EXTENSIONS=1`` forces the pure core; ``TURBOLOCK_REQUIRE_EXTENSIONS=1`` makes a
missing or broken compiled core an import error instead of a silent fallback.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from turbolock._wire import core_py as _core_py


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _load_c() -> ModuleType | None:
    try:
        core_c = importlib.import_module("turbolock._core_c")
    except ImportError:
        if _flag("TURBOLOCK_REQUIRE_EXTENSIONS"):
            raise
        return None
    return core_c


core_c: ModuleType | None = None if _flag("TURBOLOCK_NO_EXTENSIONS") else _load_c()
core_py: ModuleType = _core_py
default_core: ModuleType = core_c if core_c is not None else core_py


def get_core(name: str | None) -> ModuleType:
    """The core called ``name`` ("c" or "py"), or the default one for None."""
    if name is None:
        return default_core
    if name == "py":
        return core_py
    if name == "c":
        if core_c is None:
            from turbolock.errors import InvalidArgumentError

            raise InvalidArgumentError("core", "the compiled core is not available in this install")
        return core_c
    from turbolock.errors import InvalidArgumentError

    raise InvalidArgumentError("core", f"must be 'c', 'py' or None, not {name!r}")
