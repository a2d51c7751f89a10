"""A Redis Cluster failing over by plan: the replica takes over once it has every write, so no
lock is lost (an unplanned failover may lose the last locks; replication is asynchronous, and
the README says so)."""

from __future__ import annotations

import pytest

from turbolock.redis_server import RedisServer

from ._expect import expect_safe
from ._faults import ClusterFailover
from ._run import run_fault
from ._topology import Cluster

pytestmark = pytest.mark.slow


def test_a_planned_failover(resource_server: RedisServer) -> None:
    with Cluster() as topology:
        expect_safe(run_fault(ClusterFailover(), topology, resource_server))
