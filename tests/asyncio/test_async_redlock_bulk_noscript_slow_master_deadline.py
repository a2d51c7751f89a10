"""AsyncRedlockClient bulk calls on a master that forgot the scripts (SCRIPT FLUSH) and answers
slowly (within the chunk timeout): the NOSCRIPT items were sent again after the chunk's wait, on
a timeout of their own (master after master), so one chunk cost two chunk timeouts and a renewal
round signalled a lost lock after its expiry (found in review). The retries now go to every
master at once, within what is left of the call's budget; the threaded fan-out keeps the same
budget.

README "Deadlines": a Redlock bulk chunk's budget is ``chunk_timeout_for(ttl)``. (The single-lock
fan-out reloads within the same wait: ``fan_out_one``'s ``reload``.)"""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from _netfaults import FaultProxy
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

NODE_TIMEOUT = 0.3
DELAY = 0.25
TTL = 2
SLACK = 0.08

pytestmark = pytest.mark.timing


@pytest.mark.parametrize("op", ["release_many", "extend_many"])
def test_bulk_chunk_after_script_flush_on_a_slow_master(three: list[RedisServer], raws, core_name: str,
                                                         key_prefix: str, op: str) -> None:
    conns = raws(three)
    with FaultProxy(three[0].host, three[0].port) as proxy:
        urls = [proxy.url, three[1].url, three[2].url]

        async def body() -> tuple[float, float, object]:
            async with AsyncRedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name,
                                          key_prefix=key_prefix) as client:
                leases = (await client.acquire_many(["a", "b"], TTL)).acquired
                assert len(leases) == 2
                budget = client.chunk_timeout_for(TTL * 1000)
                conns[0].script_flush()
                proxy.delay(DELAY, to_server=False)  # master 0 answers within the chunk timeout
                started = time.monotonic()
                if op == "release_many":
                    result: object = await client.release_many(leases)
                else:
                    result = await client.extend_many(leases, TTL)
                elapsed = time.monotonic() - started
                proxy.heal()
                if op == "extend_many":
                    await client.release_many(leases)
                return elapsed, budget, result

        elapsed, budget, result = asyncio.run(body())
    assert result == [True, True]
    assert elapsed < budget + SLACK, f"{op} of one chunk took {elapsed:.3f}s, chunk timeout {budget}s"


def test_renewal_loss_signalled_by_the_expiry_after_script_flush_on_a_slow_master(
        own_masters, core_name: str, key_prefix: str) -> None:
    """The renewal round is a bulk fan-out too: its NOSCRIPT reload waits a second round
    timeout past the round's deadline (the lease's expiry less a margin), so a lock lost while
    the masters cannot renew it is signalled after the program's belief of its expiry
    (README "faults": "every lost renewed lock was signalled by its expiry")."""
    servers = own_masters(3)
    with FaultProxy(servers[1].host, servers[1].port) as proxy:
        urls = [servers[0].url, proxy.url, servers[2].url]

        async def body() -> float:
            async with AsyncRedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name,
                                          key_prefix=key_prefix) as client:
                signalled: list[float] = []
                lease = await client.try_acquire("renewed", 1.0, auto_renew=True,
                                                 on_lost=lambda _: signalled.append(time.monotonic()))
                assert lease is not None
                with redis.Redis(port=servers[1].port) as raw:
                    raw.script_flush()  # master 1 forgot RENEW_MANY (a restart, SCRIPT FLUSH)
                proxy.delay(DELAY, to_server=False)  # and answers within the round's timeout
                servers[0].pause()
                servers[2].pause()  # no quorum: the lock cannot be renewed and must be signalled lost
                try:
                    expiry = time.monotonic() + lease.valid_for()
                    assert await client.wait_lost(lease, 3) is True
                finally:
                    servers[0].resume()
                    servers[2].resume()
                    proxy.heal()
                return signalled[0] - expiry

        late = asyncio.run(body())
    assert late < 0.05, f"on_lost came {late:.3f}s after the lease's believed expiry"
