"""A Sentinel client that opens a new connection (its pool grows, or was emptied) while it still
believes a master the Sentinels have already replaced asks them again within the call's
deadline and goes on at the master they name, instead of failing the call. (It failed with the
old master's ConnectionError, and only the next call asked the Sentinels.)

The once-a-second check of the Sentinels is switched off: it narrows the window to about a
second; the connect's own retry is what is tested."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from _blocking_async import FRONTS
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_checks_off, sentinel_fronts, value_on

T = 2.0


def _drop_pooled(client: Any, front: str) -> None:
    """Empty the client's pool (as when every pooled connection is busy and it opens another)."""
    if front == "threads":
        client._exec.pool.drop_all()
        return

    async def drop() -> None:
        client._target._exec.pool.drop_all()

    client._runner.run(drop())


@pytest.mark.parametrize("front", FRONTS)
def test_a_new_connection_to_a_replaced_master_goes_to_the_one_the_sentinels_name(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str, front: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel_checks_off(monkeypatch)
    group = own_sentinel_group(replicas=1, sentinels=1, down_after=1000)
    fronts = sentinel_fronts(front, group, core_name, key_prefix, timeout=T, connect_timeout=T / 2)
    old_port = group.master_port()
    try:
        client = fronts.make()
        assert client.query("warm-up").held is False  # the client believes the first master
        group.node_at(old_port).kill()
        new_master = group.wait_failover(old_port)
        _drop_pooled(client, front)
        started = time.monotonic()
        lease = client.try_acquire("after", 30)
        took = time.monotonic() - started
        assert lease is not None
        assert value_on(new_master, key_prefix + "after") == lease.token
        assert took < T + 0.5, f"took {took:.2f} s, past the call's timeout"
        assert client.release(lease)
    finally:
        fronts.close()
