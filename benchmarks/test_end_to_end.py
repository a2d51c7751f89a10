"""A client against a real redis-server: one acquire+release pair, and 10k locks in bulk, per core."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from turbolock import LockClient
from turbolock.bench.workload import CHUNK_SIZE, TTL_SECONDS, names
from turbolock.redis_server import RedisServer

BULK = 10_000


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as redis_server:
        yield redis_server


@pytest.fixture
def client(server: RedisServer, core_name: str) -> Iterator[LockClient]:
    with LockClient.from_url(server.url, core=core_name, key_prefix=f"bench-{uuid.uuid4().hex[:8]}:",
                             chunk_size=CHUNK_SIZE, max_connections=1) as lock_client:
        yield lock_client


@pytest.mark.benchmark(group="single acquire+release")
def test_single_pair(benchmark: Any, client: LockClient) -> None:
    counter = itertools.count()

    def pair() -> bool:
        lease = client.try_acquire(f"pair:{next(counter):012d}", TTL_SECONDS)
        assert lease is not None
        return client.release(lease)

    assert benchmark(pair)


@pytest.mark.benchmark(group="bulk acquire+release of 10k")
def test_bulk_acquire_release(benchmark: Any, client: LockClient) -> None:
    lock_names = names("bulk", BULK)

    def cycle() -> tuple[int, int]:
        result = client.acquire_many(lock_names, TTL_SECONDS)
        released = client.release_many(result.acquired)
        return len(result.acquired), sum(released)

    assert benchmark.pedantic(cycle, rounds=10, warmup_rounds=1) == (BULK, BULK)
