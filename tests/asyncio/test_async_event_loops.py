"""One AsyncLockClient across event loops: consecutive ``asyncio.run()`` calls, a loop left idle,
and a loop still running in another thread.

Connections belong to the loop that opened them. A client used from a new loop drops the
connections of a loop that is closed or idle and opens new ones where it runs now; while their
loop still runs in another thread it refuses with ``LockUsageError`` and touches nothing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import redis
from async_helpers import NewClient, keys_left, new_loop, run_in_new_loop

from turbolock import Lease, LockUsageError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

# The first loop is closed with the client's connection still open, on purpose: the stdlib
# says so when that transport is collected.
pytestmark = pytest.mark.filterwarnings("ignore:unclosed:ResourceWarning")


def run_once(loop_name: str, body: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """``asyncio.run``, or ``uvloop.run``: a new loop, its tasks cancelled and the loop closed at the end."""
    if loop_name == "asyncio":
        return asyncio.run(body())
    import uvloop

    return uvloop.run(body())


def _client_connections(raw: redis.Redis) -> int:
    """Connections the server has besides ``raw``'s own."""
    return len(raw.client_list()) - 1


def _wait_for(condition: Callable[[], bool], limit: float = 5.0) -> bool:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_one_client_across_consecutive_asyncio_runs(loop_name: str, own_server: RedisServer,
                                                    own_raw: redis.Redis, core_name: str,
                                                    key_prefix: str) -> None:
    client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix)
    key = key_prefix.encode() + b"order:1"

    async def first() -> Lease:
        lease = await client.try_acquire("order:1", 30)
        assert lease is not None
        return lease

    lease = run_once(loop_name, first)
    assert own_raw.get(key) == lease.token

    async def second() -> None:
        assert await client.try_acquire("order:1", 30) is None, "still held by the first run's lease"
        assert await client.release(lease) is True
        again = await client.try_acquire("order:1", 30)
        assert again is not None and own_raw.get(key) == again.token
        result = await client.acquire_many(["m1", "m2"], 30)
        assert len(result.acquired) == 2
        assert await client.release_many([again, *result.acquired]) == [True, True, True]
        assert len(client._pool.connections) == 1

    run_once(loop_name, second)
    # The first run's connection was shut down when the second run dropped it; the second run's is
    # left open (by asyncio's loop; uvloop closes it with the loop) until close().
    assert _wait_for(lambda: _client_connections(own_raw) <= 1)
    run_once(loop_name, client.close)
    assert client.closed
    assert _wait_for(lambda: _client_connections(own_raw) == 0)
    assert keys_left(own_raw, key_prefix) == []


def test_close_in_a_later_run(loop_name: str, redis_server: RedisServer, raw: redis.Redis, core_name: str,
                              key_prefix: str) -> None:
    client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)

    async def first() -> None:
        assert await client.try_acquire("held", 30) is not None

    run_once(loop_name, first)
    run_once(loop_name, client.close)  # today's "Event loop is closed" came from here too
    assert client.closed
    assert keys_left(raw, key_prefix) != [], "a plain lease is not released by close()"


def test_an_acquire_cut_off_by_the_end_of_a_run_is_released_in_the_next(
        loop_name: str, own_server: RedisServer, own_raw: redis.Redis, core_name: str,
        key_prefix: str) -> None:
    client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=30)
    key = key_prefix.encode() + b"cut-off"

    async def first() -> None:
        assert await client.query("warm-up") is not None  # the connection is open before the pause
        own_server.pause()
        task = asyncio.get_running_loop().create_task(client.try_acquire("cut-off", 60))
        await asyncio.sleep(0.1)  # the SET is written; its reply cannot come
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        run_once(loop_name, first)
    finally:
        own_server.resume()
    # The server runs the first run's SET once it resumes: the lock is taken for nobody.
    assert _wait_for(lambda: own_raw.exists(key) == 1)

    async def second() -> None:
        assert (await client.query("other")).held is False
        deadline = time.monotonic() + 10
        while (client.pending_cleanup or own_raw.exists(key)) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert own_raw.exists(key) == 0, "the maybe-held lock of the dead loop was released with its token"
        assert client.pending_cleanup == 0
        await client.close()

    run_once(loop_name, second)


def test_a_loop_left_idle_and_used_again(loop_name: str, redis_server: RedisServer, raw: redis.Redis,
                                         core_name: str, key_prefix: str) -> None:
    client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    idle = new_loop(loop_name)
    try:
        lease = idle.run_until_complete(client.try_acquire("idle", 30))
        assert lease is not None

        async def meanwhile() -> None:
            assert (await client.query("idle")).held

        run_once(loop_name, meanwhile)  # the idle loop's connection is closed through that loop
        assert idle.run_until_complete(client.release(lease)) is True
        idle.run_until_complete(client.close())
    finally:
        idle.close()
    assert keys_left(raw, key_prefix) == []


def test_a_client_of_a_loop_running_in_another_thread_is_refused(loop_name: str, redis_server: RedisServer,
                                                                 raw: redis.Redis, new_client: NewClient,
                                                                 key_prefix: str) -> None:
    client = new_client()
    other = new_loop(loop_name)
    thread = threading.Thread(target=other.run_forever, name="other-loop", daemon=True)
    thread.start()

    def in_other_loop(body: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(body, other).result(10)

    try:
        lease = in_other_loop(client.try_acquire("theirs", 30))
        assert lease is not None
        commands_before = raw.info("stats")["total_commands_processed"]

        async def here() -> None:
            for call in (lambda: client.query("theirs"), lambda: client.release(lease),
                         lambda: client.try_acquire("mine", 30)):
                with pytest.raises(LockUsageError) as raised:
                    await call()
                assert "another event loop" in str(raised.value)

        run_in_new_loop(loop_name, here)
        # Refused before sending anything: only the INFO above reached the server meanwhile.
        assert raw.info("stats")["total_commands_processed"] == commands_before + 1
        assert in_other_loop(client.query("theirs")).held, "the other loop's connection still works"
        assert in_other_loop(client.release(lease)) is True
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(10)
        other.close()

    async def after() -> None:  # that loop is closed now: this one takes the client over
        lease = await client.try_acquire("mine", 30)
        assert lease is not None and await client.release(lease)
        await client.close()

    run_in_new_loop(loop_name, after)
    assert keys_left(raw, key_prefix) == []


def test_auto_renewal_across_consecutive_runs(loop_name: str, redis_server: RedisServer, raw: redis.Redis,
                                              core_name: str, key_prefix: str) -> None:
    client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)

    async def renew_then_go_idle() -> None:
        lease = await client.try_acquire("renewed", 1, auto_renew=True)
        assert lease is not None
        await asyncio.sleep(1.2)  # past its ttl: renewed
        lease.ensure_held()
        assert await client.release(lease)
        await asyncio.sleep(0.05)  # the renewer, with nothing left, waits for the next lock
        renewer = client._renewer_instance
        assert renewer is not None and renewer._task is not None
        task = renewer._task
        assert not task.done() or task.cancelled() or task.exception() is None, task.exception()

    run_once(loop_name, renew_then_go_idle)
    run_once(loop_name, renew_then_go_idle)
    run_once(loop_name, client.close)
    assert keys_left(raw, key_prefix) == []


# The subscriber and the renewal task belong to a loop too: they follow the connections to the
# next run (found in review: close() in a later run raised "Event loop is closed" from the
# subscriber, a later blocking acquire waited a whole call timeout for a subscription written on
# the dead loop's connection, and an auto-renewed lock expired unrenewed and unreported).


def _blocking_acquire_of_released(client: AsyncLockClient, holder: Any, name: str
                                  ) -> Callable[[], Coroutine[Any, Any, float]]:
    """A run that waits for ``name``, held by ``holder`` (a threaded client) and released 0.2 s
    later; how long after the release the wait had the lock."""
    async def wait() -> float:
        lease = holder.try_acquire(name, 30)
        assert lease is not None
        asyncio.get_running_loop().call_later(0.2, holder.release, lease)
        began = time.monotonic()
        async with client.lock(name, ttl=5, timeout=10):
            pass
        return time.monotonic() - began - 0.2
    return wait


def test_a_woken_wait_then_close_in_a_later_run(loop_name: str, redis_server: RedisServer, core_name: str,
                                               key_prefix: str) -> None:
    from turbolock import LockClient

    holder = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    try:
        assert run_once(loop_name, _blocking_acquire_of_released(client, holder, "woken")) < 0.5
        run_once(loop_name, client.close)
        assert client.closed
    finally:
        holder.close()


def test_a_blocking_acquire_in_a_later_run_is_woken(loop_name: str, redis_server: RedisServer, core_name: str,
                                                    key_prefix: str) -> None:
    from turbolock import LockClient

    holder = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix, timeout=3)
    client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix, timeout=3)
    try:
        assert run_once(loop_name, _blocking_acquire_of_released(client, holder, "first")) < 0.5
        assert run_once(loop_name, _blocking_acquire_of_released(client, holder, "second")) < 0.5
        run_once(loop_name, client.close)
    finally:
        holder.close()


def test_an_auto_renewed_lock_is_renewed_in_the_next_run(loop_name: str, redis_server: RedisServer,
                                                        core_name: str, key_prefix: str) -> None:
    client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)

    async def take() -> Lease | None:
        return await client.try_acquire("job", ttl=0.6, auto_renew=True)

    lease = run_once(loop_name, take)
    assert lease is not None

    async def later() -> tuple[float | None, bool]:
        assert (await client.query("other")).held is False  # the client works on this loop
        await asyncio.sleep(1.5)  # two and a half ttls
        left = await client.check(lease)
        lost = lease.is_lost
        await client.close()
        return left, lost

    left, lost = run_once(loop_name, later)
    assert left is not None and not lost, "the lock was neither renewed in the next run nor reported lost"
