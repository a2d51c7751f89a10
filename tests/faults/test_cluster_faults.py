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
        outcome = run_fault(ClusterFailover(), topology, resource_server)
    # A coordinated failover holds the master's writers until the replica caught up: on a
    # loaded machine that can take most of the window, so fewer sections run.
    expect_safe(outcome, least=5)
