"""Fixtures for the pytest-benchmark files: both cores, ids ``c`` and ``py``.

These benchmarks are not part of the test suite (testpaths is tests/); run them with
``python -m pytest benchmarks -q --benchmark-only``.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from turbolock._wire import core as _core


@pytest.fixture(params=["c", "py"])
def core_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "c" and _core.core_c is None:
        pytest.skip("the compiled core is not built")
    return name


@pytest.fixture
def core(core_name: str) -> ModuleType:
    return _core.get_core(core_name)
