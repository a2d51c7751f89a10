"""try_acquire on a Sentinel client after the master it is connected to was demoted: a write
refused with READONLY did not run, and goes once more to the master the Sentinels name now, on
both fronts. The old master is demoted by the test right after the Sentinels named the new one,
its clients' connections kept (the Sentinels' own demotion, seconds later, kills them); the
client's once-a-second check of the Sentinels is off, standing for the second before it runs.
Found in review: the asyncio client wrote on its pool's connection itself, unguarded, and
raised ConnectionError."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from _blocking_async import FRONTS
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_checks_off, sentinel_fronts, value_on


@pytest.mark.parametrize("front", FRONTS)
def test_try_acquire_on_a_demoted_master_goes_to_the_new_one(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str, front: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel_checks_off(monkeypatch)
    group = own_sentinel_group(replicas=1, sentinels=3)
    fronts = sentinel_fronts(front, group, core_name, key_prefix, timeout=1.0, connect_timeout=1.0)
    try:
        client = fronts.make()
        assert client.query("warm-up").held is False  # a connection to the master
        old_port = group.master_port()
        assert "OK" in group.cli(group.sentinels[0], "sentinel", "failover", group.service)
        new_master = group.wait_failover(old_port)
        # The old master is demoted with its clients' connections kept (the Sentinels' own
        # demotion, some seconds later, also kills them): writes on them are refused READONLY.
        old = redis.Redis(host=group.node_at(old_port).host, port=old_port)
        try:
            old.execute_command("REPLICAOF", new_master.host, new_master.port)
        finally:
            old.close()
        lease = client.try_acquire("after", 10)  # asyncio: ConnectionError (READONLY)
        assert lease is not None
        assert value_on(new_master, key_prefix + "after") == lease.token
    finally:
        fronts.close()
