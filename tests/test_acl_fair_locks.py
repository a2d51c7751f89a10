"""An ACL user with exactly the fair-lock permissions the README lists ("Fair locks":
``~{<prefix>*`` and zrange, zadd, zrem, zscore, zcard, hget, hset, hdel, hkeys, pexpire, del,
time, on top of the single-server minimum) waits, gives up and leaves the queue, and the next
waiter takes the free lock at once. The leave script called ``ZRANK``, not on the list: a waiter
that timed out kept its place at the head, and the next fair acquire of the free lock waited out
the queue's patience (3 s). Found in review."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from turbolock import LockClient
from turbolock.redis_server import RedisServer

PASSWORD = "Fair-Secret-Pa55"
MINIMUM = "+set +pttl +evalsha +script|load +get +del +pexpire"
FAIR_AS_DOCUMENTED = "+zrange +zadd +zrem +zscore +zcard +hget +hset +hdel +hkeys +pexpire +del +time"


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    users = [f"user fair on >{PASSWORD} ~turbolock:* ~{{turbolock:* -@all {MINIMUM} {FAIR_AS_DOCUMENTED}"]
    with RedisServer(extra_config=users) as made:
        yield made


def test_a_fair_waiter_that_gives_up_leaves_the_queue(server: RedisServer, core_name: str) -> None:
    prefix = f"turbolock:{uuid.uuid4().hex[:10]}:"
    url = f"redis://fair:{PASSWORD}@127.0.0.1:{server.port}/0"
    with LockClient.from_url(url, core=core_name, key_prefix=prefix) as holder, \
            LockClient.from_url(url, core=core_name, key_prefix=prefix) as waiters, \
            redis.Redis(port=server.port) as raw:
        lease = holder.try_acquire("f", 10)
        assert lease is not None
        assert waiters.lock("f", 10, fair=True).acquire(timeout=0.3) is False  # gives up, leaves
        assert holder.release(lease)
        late = waiters.lock("f", 10, fair=True)
        # The lock is free and nobody waits any more: the next fair waiter takes it at once.
        assert late.acquire(timeout=1.5), \
            f"queue still holds {raw.zcard(f'{{{prefix}f}}:queue')} departed waiter(s)"
        late.release()
