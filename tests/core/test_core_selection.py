"""The compiled core really loads when the build says it must (CI sets the variable)."""

from __future__ import annotations

import pytest


def test_c_core_loaded_when_required(require_extensions: bool) -> None:
    if not require_extensions:
        pytest.skip("TURBOLOCK_REQUIRE_EXTENSIONS is not set")
    from turbolock._wire import core as _core

    assert _core.default_core.IMPLEMENTATION == "c"
    assert _core.get_core("c") is _core.default_core
