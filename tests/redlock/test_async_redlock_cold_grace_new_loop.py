"""An AsyncRedlockClient made in a parent and first used in a forked child (asyncio.run there),
or in a second asyncio.run() in the same process, has no connection to any master: a cold
client, whose first connections get their connect timeout as grace (``_aio.fanout._wait``).
The pools kept the parent's (the old loop's) "first connect over", so over links where a round
trip takes 0.2 s (node_timeout 0.3 s) that first call failed with QuorumError, where a client
made afresh succeeds. Found in review. Several OS processes (os.fork), both cores."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator

import pytest

from _forking import in_forked_child
from _netfaults import FaultProxy
from turbolock import LockError
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # one pool for both cores

NODE_TIMEOUT = 0.3
DELAY = 0.2  # each reply, and each handshake reply, this late: a warm call fits, a cold one does not
TTL = 10


@pytest.fixture
def slow_urls(own_masters: Callable[[int], list[RedisServer]]) -> Iterator[list[str]]:
    servers = own_masters(3)
    proxies = [FaultProxy(s.host, s.port).start() for s in servers]
    try:
        for proxy in proxies:
            proxy.delay(DELAY, to_server=False, to_client=True)
        yield [proxy.url for proxy in proxies]
    finally:
        for proxy in proxies:
            proxy.stop()


async def _first_acquire(client: AsyncRedlockClient, name: str) -> str:
    try:
        lease = await client.try_acquire(name, TTL)
    except LockError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        await client.close()
    return "ok" if lease is not None else "None"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_childs_first_redlock_call_gets_a_cold_clients_grace(
        slow_urls: list[str], core_name: str, key_prefix: str) -> None:
    client = AsyncRedlockClient(slow_urls, node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix)

    async def parent_first() -> object:
        return await client.try_acquire("parent", TTL)  # cold: its connects get their grace

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(parent_first()) is not None
        control = in_forked_child(lambda: asyncio.run(_first_acquire(
            AsyncRedlockClient(slow_urls, node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix),
            "control")))
        assert control == "ok", f"control (a client made in the child): {control}"
        inherited = in_forked_child(lambda: asyncio.run(_first_acquire(client, "child")))
        assert inherited == "ok", f"the child's first call on the parent's client failed: {inherited}"
    finally:
        loop.run_until_complete(client.close())
        loop.close()


def test_a_second_asyncio_run_first_redlock_call_gets_a_cold_clients_grace(
        slow_urls: list[str], core_name: str, key_prefix: str) -> None:
    """The same in one process: README "asyncio" says a client used from one asyncio.run() and
    then another works on the new loop; its connections to the closed loop are dropped, so the
    first call there is cold too (``ConnectionPool._leave`` keeps ``first_connect_over``)."""
    client = AsyncRedlockClient(slow_urls, node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix)

    async def first(name: str) -> str:
        try:
            lease = await client.try_acquire(name, TTL)
        except LockError as exc:
            return f"{type(exc).__name__}: {exc}"
        return "ok" if lease is not None else "None"

    try:
        assert asyncio.run(first("run1")) == "ok"
        second = asyncio.run(first("run2"))
        assert second == "ok", f"the first call of the second asyncio.run failed: {second}"
    finally:
        asyncio.run(client.close())
