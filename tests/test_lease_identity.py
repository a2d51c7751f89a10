"""A lease's name is read-only: its commands go to the key made from it, with a token the other
locks of its chunk may share, so a name changed on a lease would send them to another lock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from turbolock import LockClient
from turbolock.redis_server import RedisServer


@pytest.fixture
def bulk(redis_server: RedisServer, core_name: str, key_prefix: str) -> Iterator[LockClient]:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        yield client


def test_a_lease_name_cannot_be_changed(bulk: LockClient, raw: redis.Redis) -> None:
    a, b = bulk.acquire_many(["shard:a", "shard:b"], 30).acquired
    assert a.token == b.token, "one token for the chunk: what makes a changed name dangerous"
    with pytest.raises(AttributeError):
        a.name = "shard:b"  # type: ignore[misc]
    assert a.name == "shard:a" and a.key == b"shard:a"
    assert bulk.release_many([a]) == [True]
    assert raw.get(bulk.key_prefix + b"shard:b") == b.token, "lock b untouched"


def test_locks_handed_out_one_by_one_are_given_their_own_tokens(bulk: LockClient, raw: redis.Redis) -> None:
    # The README's hand-over: a coordinator takes the shards with a token per shard and hands
    # each (name, token) to a worker, which adopts it. One that names the wrong shard is refused.
    tokens = [b"%016d" % i for i in range(10)]
    leases = bulk.acquire_many([f"job:{i}" for i in range(10)], 30, tokens=tokens).acquired
    assert [lease.token for lease in leases] == tokens
    worker_3 = bulk.lease("job:4", tokens[3])  # off by one
    assert not bulk.release(worker_3), "job 3's token released job 4"
    assert raw.get(bulk.key_prefix + b"job:4") == tokens[4]
    # The control: the default tokens of one chunk are shared, so the same slip would release it.
    shared = bulk.acquire_many([f"job:{i}" for i in range(10, 20)], 30).acquired
    assert bulk.release(bulk.lease("job:14", shared[3].token)), "a chunk's leases share one token"
