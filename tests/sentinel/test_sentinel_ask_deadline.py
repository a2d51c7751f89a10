"""A call that has to ask the Sentinels for the master keeps its deadline, on both fronts: with
its master killed and the Sentinels not answering (SIGSTOP: their ports accept), each call
raises ConnectionError within its timeout. Found in review: the asyncio client gave each
Sentinel a whole call timeout of its own, then the connect and ROLE theirs (about three call
timeouts a call)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from _blocking_async import FRONTS
from _netfaults import Stopwatch
from turbolock import ConnectionError
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_fronts

pytestmark = pytest.mark.timing  # calls against their deadline

T = 0.4


@pytest.mark.parametrize("front", FRONTS)
def test_asking_stopped_sentinels_keeps_the_call_deadline(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str,
        front: str) -> None:
    group = own_sentinel_group(replicas=0, sentinels=3, down_after=60000)
    fronts = sentinel_fronts(front, group, core_name, key_prefix, timeout=T, connect_timeout=T)
    watch = Stopwatch()
    try:
        client = fronts.make()
        assert client.query("warm-up").held is False
        master = group.node_at(group.master_port())
        time.sleep(1.5)  # the client's check of the Sentinels has connected to them
        for sentinel in group.sentinels:
            sentinel.pause()
        try:
            master.kill()
            for i in range(3):
                watch.expect_raises(watch.run(f"query {i}", T, lambda: client.query("x")), ConnectionError)
        finally:
            for sentinel in group.sentinels:
                sentinel.resume()
    finally:
        fronts.close()
    watch.check()
