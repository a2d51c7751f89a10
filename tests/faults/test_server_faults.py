"""Faults of the one lock server: stopped (SIGSTOP) past the ttl, killed and restarted with or
without persistence, its limits hit (memory, clients), and storms of CLIENT KILL and SCRIPT
FLUSH. Only a restart that forgets the locks is allowed to break them (and must be seen to)."""

from __future__ import annotations

import pytest

from turbolock.redis_server import RedisServer

from ._checker import LOST_UPDATE, OVERLAP
from ._expect import expect_detected, expect_safe
from ._faults import Limit, Restart, ServerPause, Storm
from ._run import run_fault
from ._topology import Topology

pytestmark = pytest.mark.slow


def test_server_stopped_past_the_ttl(resource_server: RedisServer) -> None:
    with Topology() as topology:
        expect_safe(run_fault(ServerPause(), topology, resource_server))


def test_restart_with_appendfsync_always_keeps_the_locks(resource_server: RedisServer) -> None:
    with Topology(persistent=True) as topology:
        expect_safe(run_fault(Restart(), topology, resource_server))


def test_negative_control_restart_without_persistence_loses_the_locks(resource_server: RedisServer) -> None:
    with Topology() as topology:
        expect_detected(run_fault(Restart(), topology, resource_server), (OVERLAP, LOST_UPDATE))


@pytest.mark.parametrize("kind", ["memory", "clients"])
def test_a_server_limit_hit(resource_server: RedisServer, kind: str) -> None:
    with Topology() as topology:
        expect_safe(run_fault(Limit(kind), topology, resource_server))


@pytest.mark.parametrize("kind", ["client-kill", "script-flush"])
def test_a_storm(resource_server: RedisServer, kind: str) -> None:
    with Topology() as topology:
        expect_safe(run_fault(Storm(kind), topology, resource_server))
