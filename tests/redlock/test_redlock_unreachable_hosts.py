"""Masters whose host does not answer a TCP connect at all (a machine gone: the SYN is dropped,
no refusal comes back) cost a Redlock call one node timeout together, not one each, as the
README promises for stopped masters. Such a master is made here on loopback: a listening socket
whose one-place accept queue is full, so the kernel drops every further SYN.

Threads opened the connections one after another, each waiting out its own connect (found in
review); asyncio opens them together (a guard). Opened together, each connect still gives up
after ``connect_timeout`` when that is shorter than the node timeout (the first version waited
for the node timeout: found in review)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from turbolock import RedlockClient
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

NODE_TIMEOUT = 0.3
TTL = 10.0
ROUNDS = 2  # the second call opens the connections again: no master is remembered as down


@pytest.fixture
def unanswering() -> Iterator[list[str]]:
    """Two URLs whose connects hang until their timeout."""
    held: list[socket.socket] = []
    urls = []
    for _ in range(2):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        filler = socket.create_connection(listener.getsockname(), timeout=1)  # the queue's one place
        held += [listener, filler]
        probe = socket.socket()
        probe.settimeout(0.1)
        with pytest.raises(TimeoutError):  # the fixture's own control: the SYN goes unanswered
            probe.connect(listener.getsockname())
        probe.close()
        urls.append(f"redis://127.0.0.1:{listener.getsockname()[1]}")
    yield urls
    for sock in held:
        sock.close()


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_two_unreachable_masters_cost_one_node_timeout(session_masters: list[RedisServer],
                                                       unanswering: list[str], core_name: str,
                                                       key_prefix: str, front: str) -> None:
    urls = [server.url for server in session_masters[:3]] + unanswering
    options: dict[str, Any] = {"core": core_name, "key_prefix": key_prefix, "node_timeout": NODE_TIMEOUT}

    def threads() -> list[tuple[float, int]]:
        out = []
        with RedlockClient(urls, **options) as client:
            for n in range(ROUNDS):
                started = time.monotonic()
                lease = client.try_acquire(f"job:{n}", TTL)
                out.append((time.monotonic() - started, 0 if lease is None else lease.instances.acquired))
        return out

    async def tasks() -> list[tuple[float, int]]:
        out = []
        async with AsyncRedlockClient(urls, **options) as client:
            for n in range(ROUNDS):
                started = time.monotonic()
                lease = await client.try_acquire(f"job:{n}", TTL)
                out.append((time.monotonic() - started, 0 if lease is None else lease.instances.acquired))
        return out

    rounds = threads() if front == "threads" else asyncio.run(tasks())
    for elapsed, acquired in rounds:
        assert acquired == 3, f"taken on {acquired} masters: {rounds}"
        assert elapsed < 1.6 * NODE_TIMEOUT, f"an acquire took {elapsed:.3f}s: {rounds}"


def test_a_connect_gives_up_after_connect_timeout(session_masters: list[RedisServer], unanswering: list[str],
                                                  core_name: str, key_prefix: str) -> None:
    urls = [server.url for server in session_masters[:3]] + unanswering
    with RedlockClient(urls, core=core_name, key_prefix=key_prefix, node_timeout=0.5,
                       connect_timeout=0.05) as client:
        started = time.monotonic()
        result = client.acquire("job", 10, blocking=False)
        elapsed = time.monotonic() - started
        assert result.instances.acquired == 3, result.describe()
        assert elapsed < 0.3, f"the acquire took {elapsed:.3f}s: connect_timeout 0.05 s, node timeout 0.5 s"
        assert result.lease is not None and client.release(result.lease)
