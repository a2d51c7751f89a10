"""Fixtures: Redlock clients on both cores, over the masters of ``tests/conftest.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from turbolock import RedlockClient
from turbolock.redis_server import RedisServer


@pytest.fixture
def make_redlock(core_name: str, key_prefix: str) -> Iterator[Callable[..., RedlockClient]]:
    """``make_redlock(servers, **options)``: a RedlockClient on this test's core and key prefix."""
    clients: list[RedlockClient] = []

    def make(servers: list[RedisServer], **options: object) -> RedlockClient:
        options.setdefault("core", core_name)
        options.setdefault("key_prefix", key_prefix)
        client = RedlockClient([server.url for server in servers], **options)  # type: ignore[arg-type]
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


