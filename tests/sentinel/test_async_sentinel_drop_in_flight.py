"""The asyncio Sentinel client drops its connections when the master changes (the watcher hears
of a new one, or a call to it fails): calls already written on them still get their replies,
as the blocking pool lets its busy connections finish. Aborting them turned every such call into
a lost outcome (an acquire "maybe held", raised as AcquireOutcomeUnknownError) where the server
was about to answer, or to refuse with READONLY, which is sent again to the next master.

The master is paused (SIGSTOP) while the calls are written, so the drop surely comes between
their writes and their replies."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from turbolock._flows.bulk_plan import AcquirePlan
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel

CALLS = 50


@pytest.fixture
def group(own_sentinel_group: Callable[..., RedisSentinel]) -> RedisSentinel:
    return own_sentinel_group(replicas=0, sentinels=1, down_after=60000)


def _client(group: RedisSentinel, core_name: str, key_prefix: str, **options: Any) -> AsyncSentinelLockClient:
    return AsyncSentinelLockClient(group.sentinel_urls, group.service, core=core_name, key_prefix=key_prefix,
                                   timeout=5.0, **options)


def test_calls_in_flight_when_the_connections_are_dropped_get_their_replies(
        group: RedisSentinel, core_name: str, key_prefix: str) -> None:
    master = group.node_at(group.master_port())

    async def body() -> None:
        async with _client(group, core_name, key_prefix) as client:
            assert await client.query("warm-up") is not None
            (old,) = client._pool.connections
            master.pause()
            try:
                calls = [asyncio.ensure_future(client.try_acquire(f"seat:{i}", 30)) for i in range(CALLS)]
                await asyncio.sleep(0.1)  # written, unanswered
                assert old.pending == CALLS
                client._pool.drop_all()
            finally:
                master.resume()
            leases = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 10)
            errors = [lease for lease in leases if isinstance(lease, BaseException)]
            assert errors == [], f"{len(errors)} calls lost their replies, the first: {errors[0]!r}"
            assert all(lease is not None for lease in leases)
            await asyncio.sleep(0.05)
            assert not old.is_open, "the dropped connection stays open once its calls are answered"
            assert old not in client._pool.connections
            infos = await client.query_many([f"seat:{i}" for i in range(CALLS)])
            assert sum(info.held for info in infos) == CALLS
            assert old not in client._pool.connections  # the call after the drop opened another

    asyncio.run(asyncio.wait_for(body(), 60))


def test_a_bulk_call_across_the_drop_finishes_its_chunks_there_and_sends_the_rest_again(
        group: RedisSentinel, core_name: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dropped between two chunks of a bulk acquire (the next one's encoder runs while one is
    in flight), the connection answers the chunk written there, takes no more (nothing is
    written to a server no longer the master), and closes; the chunks not sent go once more,
    to the master the Sentinels name (the same here), so every lock is taken."""
    names = [f"batch:{i}" for i in range(6000)]
    original = AcquirePlan.encode
    seen: list[Any] = []

    def encode(plan: AcquirePlan, buf: Any, start: int, stop: int) -> None:
        if start == 3000:
            (conn,) = client._pool.connections
            seen.append(conn)
            client._pool.drop_all()
        original(plan, buf, start, stop)

    async def body() -> None:
        result = await client.acquire_many(names, 30)
        assert len(result.acquired) == len(names)
        await asyncio.sleep(0.05)
        assert not seen[0].is_open

    client = _client(group, core_name, key_prefix, chunk_size=1000)
    monkeypatch.setattr(AcquirePlan, "encode", encode)

    async def run() -> None:
        async with client:
            await asyncio.wait_for(body(), 30)

    asyncio.run(run())
    assert len(seen) == 1
