"""A Redlock claim (``acquire_many(..., limit=k)``) over several chunks with one of three masters
SIGSTOPped: the master that failed the first chunk is left out of the next ones, so the claim
waits on it once, not once per chunk (it waited a chunk timeout per chunk; found in review).
Both fronts, both cores."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from turbolock import InstanceSummary, RedlockClient
from turbolock.asyncio import AsyncRedlockClient

pytestmark = pytest.mark.timing

NODE_TIMEOUT = 0.25
TTL = 2.5  # a chunk timeout of 0.25 s too (a tenth of the ttl)
CHUNKS = 6
CHUNK_SIZE = 2


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_claim_waits_on_a_stopped_master_once(own_masters: Any, core_name: str, key_prefix: str,
                                                front: str) -> None:
    servers = own_masters(3)
    urls = [server.url for server in servers]
    options: dict[str, Any] = {"core": core_name, "key_prefix": key_prefix, "node_timeout": NODE_TIMEOUT,
                               "chunk_size": CHUNK_SIZE}
    names = [f"shard:{i}" for i in range(CHUNKS * CHUNK_SIZE)]
    limit = len(names)

    def threads() -> tuple[float, list[Any], list[bool]]:
        with RedlockClient(urls, **options) as client:
            warm = client.acquire_many(names, TTL)  # every connection open before the stop
            assert client.release_many(warm.acquired) == [True] * len(names)
            servers[2].pause()
            try:
                started = time.monotonic()
                result = client.acquire_many(names, TTL, limit=limit)
                elapsed = time.monotonic() - started
            finally:
                servers[2].resume()
            return elapsed, result.acquired, client.release_many(result.acquired)

    async def tasks() -> tuple[float, list[Any], list[bool]]:
        async with AsyncRedlockClient(urls, **options) as client:
            warm = await client.acquire_many(names, TTL)
            assert await client.release_many(warm.acquired) == [True] * len(names)
            servers[2].pause()
            try:
                started = time.monotonic()
                result = await client.acquire_many(names, TTL, limit=limit)
                elapsed = time.monotonic() - started
            finally:
                servers[2].resume()
            return elapsed, result.acquired, await client.release_many(result.acquired)

    elapsed, acquired, released = threads() if front == "threads" else asyncio.run(tasks())
    assert len(acquired) == limit, f"claimed {len(acquired)} of {limit}"
    assert {lease.instances for lease in acquired} == {InstanceSummary(2, 0, 1)}
    assert released == [True] * limit
    # One chunk timeout for the stopped master, not one per chunk (CHUNKS of them: 1.5 s).
    assert elapsed < 3 * NODE_TIMEOUT, f"the claim of {CHUNKS} chunks took {elapsed:.3f}s"
