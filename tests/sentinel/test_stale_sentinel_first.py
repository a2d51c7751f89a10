"""A stale Sentinel listed first, one that names a replica as the master (its own, monitoring
that replica): the ROLE check refused every connection, and the client kept asking that
Sentinel first (it was promoted as soon as it answered), so every call failed with "not the
master" while the three healthy Sentinels all knew the master (found by review). Now a
Sentinel whose answer fails the check is asked last, one whose answer passes it first, and a
call refused that way asks the others within its deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial

import pytest

from _blocking_async import FRONTS
from turbolock import LockError
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.redis_server import RedisServer
from turbolock.sentinel import SentinelLockClient

from ._helpers import sentinel_fronts, value_on


@pytest.fixture
def stale(sentinel_group: RedisSentinel) -> Iterator[RedisServer]:
    """A Sentinel of its own that believes a replica is the master of the group's service."""
    master_port = sentinel_group.master_port()
    replica = next(node for node in sentinel_group.servers if node.port != master_port)
    node = RedisServer(arguments=["--sentinel"], extra_config=[
        f"sentinel monitor {sentinel_group.service} 127.0.0.1 {replica.port} 1",
        f"sentinel down-after-milliseconds {sentinel_group.service} 60000",
    ])
    with node:
        assert str(replica.port) in sentinel_group.cli(node, "sentinel", "get-master-addr-by-name",
                                                       sentinel_group.service)
        yield node


@pytest.mark.parametrize("front", FRONTS)
def test_a_stale_sentinel_listed_first_is_asked_last_once_refused(
        sentinel_group: RedisSentinel, stale: RedisServer, core_name: str, key_prefix: str,
        front: str) -> None:
    urls = [f"redis://{stale.host}:{stale.port}", *sentinel_group.sentinel_urls]
    fronts = sentinel_fronts(front, sentinel_group, core_name, key_prefix, timeout=1.0)
    fronts.make_blocking = partial(SentinelLockClient, urls, sentinel_group.service)
    fronts.make_async = partial(AsyncSentinelLockClient, urls, sentinel_group.service)
    try:
        client = fronts.make()
        lease = client.try_acquire("stale", 10)  # the first call already: refused, then asked again
        assert lease is not None
        master = sentinel_group.node_at(sentinel_group.master_port())
        assert value_on(master, key_prefix + "stale") == lease.token
        time.sleep(2.5)  # the watcher asks the Sentinels twice meanwhile: it must not drop the master
        assert client.release(lease)
        assert client.try_acquire("again", 10) is not None
    finally:
        fronts.close()


@pytest.mark.timing
@pytest.mark.parametrize("front", FRONTS)
def test_a_refused_answer_asks_the_others_within_the_calls_deadline(
        sentinel_group: RedisSentinel, stale: RedisServer, core_name: str, key_prefix: str,
        front: str) -> None:
    """The stale Sentinel's answer is refused and the others, asked again, do not answer (paused):
    the call still ends by its deadline, with a typed error."""
    timeout = 0.5
    urls = [f"redis://{stale.host}:{stale.port}", *sentinel_group.sentinel_urls]
    fronts = sentinel_fronts(front, sentinel_group, core_name, key_prefix, timeout=timeout,
                             connect_timeout=timeout)
    fronts.make_blocking = partial(SentinelLockClient, urls, sentinel_group.service)
    fronts.make_async = partial(AsyncSentinelLockClient, urls, sentinel_group.service)
    try:
        client = fronts.make()
        for sentinel in sentinel_group.sentinels:
            sentinel.pause()
        try:
            started = time.monotonic()
            with pytest.raises(LockError):
                client.try_acquire("stale", 10)
            elapsed = time.monotonic() - started
        finally:
            for sentinel in sentinel_group.sentinels:
                sentinel.resume()
        assert elapsed < timeout + 0.3, f"took {elapsed:.2f}s with a {timeout}s timeout"
    finally:
        fronts.close()
