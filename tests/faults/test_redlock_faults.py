"""Redlock's masters failing: one stopped (SIGSTOP) past the ttl, or a majority killed and
restarted without persistence, at once (the algorithm's documented hazard: the negative
control) or after a delay longer than the ttl (the documented remedy)."""

from __future__ import annotations

import pytest

from turbolock.redis_server import RedisServer

from ._checker import LOST_UPDATE, OVERLAP
from ._expect import expect_detected, expect_safe
from ._faults import Restart, ServerPause
from ._run import run_fault
from ._topology import Masters

pytestmark = pytest.mark.slow


def test_a_master_stopped_past_the_ttl(resource_server: RedisServer) -> None:
    with Masters() as topology:
        expect_safe(run_fault(ServerPause(2), topology, resource_server))


def test_a_majority_restarted_after_the_ttl(resource_server: RedisServer) -> None:
    with Masters() as topology:
        expect_safe(run_fault(Restart((0, 1), down_for=0.4), topology, resource_server))


def test_negative_control_a_majority_restarted_at_once_loses_the_locks(resource_server: RedisServer) -> None:
    with Masters() as topology:
        expect_detected(run_fault(Restart((0, 1)), topology, resource_server), (OVERLAP, LOST_UPDATE))
