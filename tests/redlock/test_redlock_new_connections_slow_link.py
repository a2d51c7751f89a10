"""A threaded Redlock client's new connections are each written to as soon as their own
handshake is done, within the attempt's node timeout: a silent master (accepts, never answers)
listed first must not leave the healthy masters, reached over a slow link (20 ms each way), only
a moment after its wait to answer the command. Reading the handshakes in turn did, and a new
client then failed its first calls with no quorum (seen under load in CI)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from _netfaults import FaultProxy, SilentServer
from turbolock import RedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

NODE_TIMEOUT = 0.25
LINK_DELAY = 0.02
SLACK = 0.3


@pytest.fixture
def urls(own_masters: Callable[[int], list[RedisServer]]) -> Iterator[list[str]]:
    servers = own_masters(2)
    silent = SilentServer().start()
    proxies = [FaultProxy(server.host, server.port).start() for server in servers]
    for proxy in proxies:
        proxy.delay(LINK_DELAY)
    try:
        yield [silent.url, *(proxy.url for proxy in proxies)]
    finally:
        for proxy in proxies:
            proxy.stop()
        silent.stop()


@pytest.mark.parametrize("call", ["try_acquire", "acquire_many"])
def test_a_new_client_beside_a_silent_master(urls: list[str], core_name: str, key_prefix: str,
                                             call: str) -> None:
    with RedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix) as client:
        started = time.monotonic()
        if call == "try_acquire":
            lease = client.try_acquire("job", 10)
            assert lease is not None and tuple(lease.instances) == (2, 0, 1)
        else:
            result = client.acquire_many(["a", "b"], 10)
            assert result.all_acquired, result
        budget = NODE_TIMEOUT if call == "try_acquire" else client.chunk_timeout_for(10_000)
        assert time.monotonic() - started < budget + SLACK
