"""Failovers under a SentinelLockClient: a graceful one (``SENTINEL FAILOVER``: the old master
stays up, still a master for about 10 s, then a replica refusing writes with READONLY) is
followed within about a second (the client asks the Sentinels every second), with every lock
kept and renewed on the new master, where a plain client left on the old master ends up
refused (the control); and a killed
master makes calls fail with typed errors within their deadline until the Sentinels promote the
replica, which then serves the locks it had."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import pytest
import redis

from _lost_locks import LostLocks
from _netfaults import served_after_failures
from turbolock import ConnectionError, LockClient, ResponseError
from turbolock._sync import sentinel as sentinel_driver
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

from ._helpers import value_on

MakeClient = Callable[..., SentinelLockClient]


def _replicated(group: RedisSentinel) -> int:
    """Replicas that have every write the master took so far (WAIT on a connection that wrote)."""
    master = group.node_at(group.master_port())
    raw = redis.Redis(host=master.host, port=master.port)
    try:
        raw.set("sync", 1, px=1000)
        return int(raw.execute_command("WAIT", 1, 2000))
    finally:
        raw.close()


# The control shows what the Sentinels do, not what a core does: on the pure core only.
@pytest.mark.parametrize(("watching", "core_name"), [(True, "c"), (True, "py"), (False, "py")],
                         ids=["c-watching", "py-watching", "py-control"], indirect=["core_name"])
def test_a_graceful_failover_is_followed_and_keeps_every_lock(
        watching: bool, own_sentinel_group: Callable[..., RedisSentinel], make_sentinel_client: MakeClient,
        core_name: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if not watching:  # the control: a client that never asks the Sentinels while its master answers
        monkeypatch.setattr(sentinel_driver, "CHECK_INTERVAL", 3600.0)
    group = own_sentinel_group(replicas=1, sentinels=3)
    client = make_sentinel_client(group, timeout=1.0)
    lost = LostLocks()
    renewed = client.acquire_many([f"job:{i}" for i in range(50)], 4.0, auto_renew=True,
                                  on_lost=lost).acquired
    held = client.try_acquire("account:7", 30)
    assert len(renewed) == 50 and held is not None
    old_port = group.master_port()
    assert _replicated(group) == 1
    plain = LockClient(port=old_port, core=core_name, key_prefix=key_prefix)  # the control
    try:
        assert "OK" in group.cli(group.sentinels[0], "sentinel", "failover", group.service)
        new_master = group.wait_failover(old_port)
        deadline = time.monotonic() + 30  # the Sentinels demote the old master about 10 s later
        while "role:slave" not in group.cli(group.node_at(old_port), "info", "replication"):
            assert time.monotonic() < deadline, "the Sentinels did not make the old master a replica"
            time.sleep(0.1)
        with pytest.raises(ResponseError) as info:  # the old master is a replica now
            plain.try_acquire("after", 10)
        assert "READONLY" in str(info.value)
    finally:
        plain.close()
    if not watching:  # renewed on the old master until it was demoted: gone from the new one
        with contextlib.suppress(ConnectionError):  # READONLY, or ROLE: the client asks the Sentinels
            client.try_acquire("after", 10)
        deadline = time.monotonic() + 5
        while len(lost.names) < 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(lost.names) == sorted(lease.name for lease in renewed)
        return
    deadline = time.monotonic() + 5
    while True:  # the client follows (a call may fail while the old master's connections go)
        try:
            after = client.try_acquire("after", 10)
            break
        except ConnectionError:
            assert time.monotonic() < deadline, "the client did not follow the failover"
            time.sleep(0.1)
    assert after is not None
    assert value_on(new_master, key_prefix + "after") == after.token
    assert lost.names == []  # over two ttls since the failover: renewed on the new master
    assert all(client.check(lease) is not None for lease in [*renewed, held])
    assert client.try_acquire("account:7", 30) is None
    assert client.release_many([*renewed, held, after]) == [True] * 52


def test_a_killed_master_fails_calls_in_time_then_the_promoted_replica_serves(
        own_sentinel_group: Callable[..., RedisSentinel], make_sentinel_client: MakeClient) -> None:
    group = own_sentinel_group(replicas=1, sentinels=3, down_after=1000)
    timeout = 0.5
    client = make_sentinel_client(group, timeout=timeout, connect_timeout=timeout)
    leases = client.acquire_many([f"acct:{i}" for i in range(30)], 60).acquired
    assert len(leases) == 30 and _replicated(group) == 1
    old_port = group.master_port()
    group.node_at(old_port).kill()
    failures, left = served_after_failures(lambda: client.check(leases[0]), timeout)
    assert left is not None and left > 0, "the promoted replica lost an acknowledged lock"
    assert failures >= 1
    # The client follows whichever Sentinel names the promoted replica first (the others learn
    # it within a moment): the first Sentinel may still name the old master as it answers.
    deadline = time.monotonic() + 10
    while group.master_port() == old_port:
        assert time.monotonic() < deadline, "the Sentinels never named another master"
        time.sleep(0.1)
    assert all(client.check(lease) is not None for lease in leases)
    assert client.release_many(leases) == [True] * 30
