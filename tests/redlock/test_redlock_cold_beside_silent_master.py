"""A client's very first call, every connection still to open, beside a master that accepts the
connection and never answers (a hung server): the two healthy masters' handshakes and commands
must not wait behind the silent one's, and the call ends within one node timeout with the
quorum's answer, on both fronts. (The deadline tests warm their clients up first; a service's
first call after a start meets such a master cold.)"""

from __future__ import annotations

import asyncio
import time

import pytest

from _netfaults import SLACK, SilentServer
from turbolock import RedlockClient, RedlockLease
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

NODE_TIMEOUT = 0.3
TTL = 10


def _urls(three: list[RedisServer], silent: SilentServer, silent_first: bool) -> list[str]:
    healthy = [three[0].url, three[1].url]
    return [silent.url, *healthy] if silent_first else [*healthy, silent.url]


@pytest.mark.parametrize("silent_first", [True, False], ids=["silent-first", "silent-last"])
def test_threads(three: list[RedisServer], core_name: str, key_prefix: str, silent_first: bool) -> None:
    with SilentServer() as silent, RedlockClient(_urls(three, silent, silent_first), core=core_name,
                                                 key_prefix=key_prefix, node_timeout=NODE_TIMEOUT) as client:
        started = time.monotonic()
        lease = client.try_acquire("job", TTL)
        took = time.monotonic() - started
        assert isinstance(lease, RedlockLease), lease
        assert took <= NODE_TIMEOUT + SLACK, f"the first call took {took:.3f}s"
        assert client.release(lease) is True


@pytest.mark.parametrize("silent_first", [True, False], ids=["silent-first", "silent-last"])
def test_asyncio(three: list[RedisServer], core_name: str, key_prefix: str, silent_first: bool) -> None:
    async def main(silent: SilentServer) -> None:
        async with AsyncRedlockClient(_urls(three, silent, silent_first), core=core_name,
                                      key_prefix=key_prefix, node_timeout=NODE_TIMEOUT) as client:
            started = time.monotonic()
            lease = await client.try_acquire("job", TTL)
            took = time.monotonic() - started
            assert isinstance(lease, RedlockLease), lease
            assert took <= NODE_TIMEOUT + SLACK, f"the first call took {took:.3f}s"
            assert await client.release(lease) is True

    with SilentServer() as silent:
        asyncio.run(main(silent))
