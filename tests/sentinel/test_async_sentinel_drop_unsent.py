"""The asyncio Sentinel client's connections, dropped when the master changes, answer the calls
already written on them, and write nothing more: a call queued but not yet written when the drop
came was written anyway, after it, to the server the client was just told is no longer the
master. Cut off only (a partition, here SIGSTOP), that old master took the locks, the calls
returned leases, and the master the Sentinels name held none of them (found by review). Refused
before their write, the calls then go to the master the Sentinels name, as a write refused with
READONLY does, instead of failing with ConnectionError (found by the next review)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel

CALLS = 20


@pytest.fixture
def group(own_sentinel_group: Callable[..., RedisSentinel]) -> RedisSentinel:
    return own_sentinel_group(replicas=1, sentinels=1, down_after=1000, failover_timeout=3000)


def test_calls_queued_but_unwritten_at_the_drop_are_not_written_to_the_old_master(
        group: RedisSentinel, core_name: str, key_prefix: str) -> None:
    old_port = group.master_port()
    old_master = group.node_at(old_port)

    async def body() -> None:
        async with AsyncSentinelLockClient(group.sentinel_urls, group.service, core=core_name,
                                           key_prefix=key_prefix, timeout=20.0) as client:
            assert await client.query("warm-up") is not None
            (old,) = client._pool.connections
            old_master.pause()
            try:
                # Blocks the loop: the watcher cannot drop the old connection meanwhile.
                group.wait_failover(old_port, timeout=60)
                calls = [asyncio.ensure_future(client.try_acquire(f"seat:{i}", 30)) for i in range(CALLS)]
                await asyncio.sleep(0)  # the calls run up to their write, which waits for the next turn
                assert old.pending == CALLS and old._unsent == CALLS, (old.pending, old._unsent)
                client._pool.drop_all()  # what the watcher does when the Sentinels name the new master
                await asyncio.sleep(0.2)
            finally:
                old_master.resume()
            results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 30)
            leases = [r for r in results if r is not None and not isinstance(r, BaseException)]
            infos = await client.query_many([f"seat:{i}" for i in range(CALLS)])
            granted_not_held = [lease.name for lease, info in
                                zip(leases, [infos[int(lease.name.split(":")[1])] for lease in leases],
                                    strict=True)
                                if not info.held]
            assert granted_not_held == [], (
                f"{len(granted_not_held)} of {len(leases)} leases were granted by the old master after the "
                f"drop and are not held on the master the Sentinels name; results: {results[:3]}")
            assert len(leases) == CALLS, f"calls refused by the dropped connection: {results[:3]}"
            assert all(info.held for info in infos)

    asyncio.run(asyncio.wait_for(body(), 120))
