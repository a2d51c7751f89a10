"""A process with more than 1024 open file descriptors (a busy server: sockets, files), where
turbolock's sockets get numbers past select(2)'s FD_SETSIZE. Readiness is asked by poll(2)
(``_wire/ready.py``). With select the subscriber thread took the ValueError for a lost
connection and connected again at once, over and over, each new subscription waking the waiters
to try again (thousands of connections and SETs a second for one waiter); and the pools' check
of an idle connection took every one for stale, so nearly every call opened a new connection.
Found in review."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator

import pytest
import redis

from _waking import PROMPT, acquire_in_thread, stop_polling
from turbolock import LockClient
from turbolock.redis_server import RedisServer


@pytest.fixture
def many_fds() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip("the fd limit is too low")
    if soft < 2048:
        resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        yield
    finally:
        for fd in fds:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_waiters_are_woken_in_a_process_with_many_fds(redis_server: RedisServer, core_name: str,
                                                          key_prefix: str, many_fds: None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    stop_polling(monkeypatch)
    raw = redis.Redis(port=redis_server.port)
    client = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    holder = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    try:
        held = holder.try_acquire("fds", 30)
        assert held is not None
        thread, done = acquire_in_thread(client.lock("fds", 30), 5)
        time.sleep(0.2)
        before = raw.info("stats")
        sets_before = raw.info("commandstats").get("cmdstat_set", {}).get("calls", 0)
        time.sleep(0.5)
        after = raw.info("stats")
        sets = raw.info("commandstats").get("cmdstat_set", {}).get("calls", 0) - sets_before
        connections = after["total_connections_received"] - before["total_connections_received"]
        connects = client._waker().connects
        released = time.monotonic()
        assert holder.release(held)
        thread.join(10)
        delay = done[0] - released if done else None
        assert delay is not None and delay < PROMPT and connections <= 2, (
            f"handed over after {delay}s; in 0.5 s of waiting the server received {connections} connections "
            f"(the subscriber's {connects} so far) and {sets} SET attempts from the one waiter")
    finally:
        client.close()
        holder.close()
        raw.close()


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_pooled_connections_are_kept_and_checked_in_a_process_with_many_fds(
        redis_server: RedisServer, core_name: str, key_prefix: str, many_fds: None, front: str) -> None:
    # The same select() in the pools' staleness check (``is_stale``, run on any connection idle for
    # more than 1 ms): it says "stale" for every connection, which is closed and made again.
    import asyncio

    from turbolock.asyncio import AsyncLockClient

    raw = redis.Redis(port=redis_server.port)
    before = raw.info("stats")["total_connections_received"]
    if front == "threads":
        with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
            for i in range(50):
                assert client.query(f"q{i}").held is False
                time.sleep(0.005)
            made = raw.info("stats")["total_connections_received"] - before
            _kill_clients_but(raw)
            time.sleep(0.01)
            assert client.query("after-kill").held is False  # the closed one was seen stale
    else:
        async def body() -> int:
            async with AsyncLockClient.from_url(redis_server.url, core=core_name,
                                                key_prefix=key_prefix) as client:
                for i in range(50):
                    assert (await client.query(f"q{i}")).held is False
                    await asyncio.sleep(0.005)
                made = raw.info("stats")["total_connections_received"] - before
                _kill_clients_but(raw)
                await asyncio.sleep(0.01)
                assert (await client.query("after-kill")).held is False
                return made

        made = asyncio.run(body())
    raw.close()
    assert made <= 2, f"{made} connections made for 50 calls one after another"


def _kill_clients_but(raw: redis.Redis) -> None:
    """Close every connection but ``raw``'s own, from the server's side."""
    raw.client_kill_filter(skipme=True, _type="normal")
