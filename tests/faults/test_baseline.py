"""The baseline: the workload with no fault at all finds nothing, on one server and on Redlock."""

from __future__ import annotations

import pytest

from turbolock.redis_server import RedisServer

from ._expect import expect_safe
from ._faults import Fault
from ._run import run_fault
from ._topology import Masters, Topology

pytestmark = pytest.mark.slow


def test_no_fault_on_one_server(resource_server: RedisServer) -> None:
    with Topology() as topology:
        expect_safe(run_fault(Fault(), topology, resource_server))


def test_no_fault_on_redlock(resource_server: RedisServer) -> None:
    with Masters() as topology:
        expect_safe(run_fault(Fault(), topology, resource_server))
