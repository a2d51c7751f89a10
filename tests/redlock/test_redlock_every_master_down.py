"""Every Redlock call with every master down answers with turbolock's own errors (QuorumError, a
result's NO_QUORUM status), threads and asyncio, both cores. ``extend_many`` raised a bare
IndexError (its fan-out reached no master, so no chunk had a start time), which code catching
LockError missed. Found in review."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _blocking_async import FRONTS, Blocking
from turbolock import RedlockClient, RedlockStatus
from turbolock.asyncio import AsyncRedlockClient
from turbolock.errors import LockError, QuorumError
from turbolock.redis_server import RedisServer


@pytest.fixture(params=FRONTS)
def make_any(request: pytest.FixtureRequest, core_name: str, key_prefix: str) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def make(servers: list[RedisServer]) -> Any:
        urls = [server.url for server in servers]
        client: Any
        if request.param == "threads":
            client = RedlockClient(urls, core=core_name, key_prefix=key_prefix)
        else:
            client = Blocking(lambda: AsyncRedlockClient(urls, core=core_name, key_prefix=key_prefix))
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def test_extend_many_with_every_master_down_raises_quorum_error(
        own_masters: Callable[[int], list[RedisServer]], make_any: Callable[..., Any]) -> None:
    servers = own_masters(3)
    client = make_any(servers)
    leases = client.acquire_many(["a", "b"], 10).acquired
    assert len(leases) == 2
    for server in servers:
        server.kill()
    with pytest.raises(QuorumError) as raised:
        client.extend_many(leases, 10)
    assert sorted(raised.value.names) == ["a", "b"]
    assert all(lease.valid_for() > 0 for lease in leases)  # nothing went out: still as they were


def test_the_other_calls_with_every_master_down(own_masters: Callable[[int], list[RedisServer]],
                                                make_any: Callable[..., Any]) -> None:
    servers = own_masters(3)
    client = make_any(servers)
    lease = client.try_acquire("one", 10)
    more = client.acquire_many(["x", "y"], 10).acquired
    assert lease is not None and len(more) == 2
    for server in servers:
        server.kill()
    result = client.acquire_many(["p", "q"], 10)
    assert result.statuses == [RedlockStatus.NO_QUORUM] * 2
    assert client.acquire_many(["p", "q"], 10, limit=1).acquired == []
    with pytest.raises(QuorumError):
        client.extend(lease, 10)
    with pytest.raises(QuorumError):
        client.check(lease)
    with pytest.raises(QuorumError):
        client.query("one")
    with pytest.raises(LockError):
        client.release_many(more)
    with pytest.raises(QuorumError):
        client.try_acquire("z", 10)
