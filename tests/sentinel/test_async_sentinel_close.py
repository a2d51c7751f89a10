"""The asyncio Sentinel client's close(), against the rules every client's close() keeps (found
in review):

- a call begun once close() began is refused (``ClientClosedError``), as on one server: the
  Sentinel pool let calls in while close() awaited its cancelled watcher, and a try_acquire
  then took a lock that close() neither renews nor releases;
- close() leaves no task behind: a connect that close() served started a new watcher (the task
  asking the Sentinels once a second), which nobody cancelled, for the life of the loop."""

from __future__ import annotations

import asyncio

import pytest

from turbolock import ClientClosedError
from turbolock.asyncio import AsyncLockClient, AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the pools' rules: no core's own


@pytest.mark.parametrize("kind", ["sentinel", "one-server"])  # one server: the rule, kept there already
def test_a_call_begun_once_close_began_is_refused(sentinel_group: RedisSentinel, core_name: str,
                                                  key_prefix: str, kind: str) -> None:
    async def scenario() -> object:
        options = {"core": core_name, "key_prefix": key_prefix, "timeout": 2.0, "max_connections": 1}
        client: AsyncSentinelLockClient | AsyncLockClient
        if kind == "sentinel":
            client = AsyncSentinelLockClient(sentinel_group.sentinel_urls, sentinel_group.service, **options)
        else:
            client = AsyncLockClient("127.0.0.1", sentinel_group.master_port(), **options)
        first = await client.try_acquire("first", ttl=5)  # the watcher runs (Sentinel)
        assert first is not None
        assert await client.release(first)
        closing = asyncio.ensure_future(client.close())
        await asyncio.sleep(0)  # close() has begun
        try:
            late: object = await client.try_acquire("late", ttl=5)
        except ClientClosedError as exc:
            late = exc
        await closing
        return late

    late = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert isinstance(late, ClientClosedError), f"a try_acquire begun once close() began got {late!r}"


def _watchers() -> list[asyncio.Task[object]]:
    return [task for task in asyncio.all_tasks()
            if not task.done() and task.get_coro().__qualname__.endswith("SentinelPool._watch")]  # type: ignore[union-attr]


def test_close_leaves_no_watcher_running(sentinel_group: RedisSentinel, core_name: str,
                                         key_prefix: str) -> None:
    async def scenario() -> list[str]:
        client = AsyncSentinelLockClient(sentinel_group.sentinel_urls, sentinel_group.service, core=core_name,
                                         key_prefix=key_prefix, timeout=2.0)
        call = asyncio.ensure_future(client.try_acquire("first", ttl=5))
        await asyncio.sleep(0)  # the call asked for a connection: close() serves its connect
        await client.close()
        await asyncio.gather(call, return_exceptions=True)
        await asyncio.sleep(1.2)  # a watcher asks every second
        left = _watchers()
        for task in left:
            task.cancel()
        return [repr(task) for task in left]

    left = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert left == [], f"close() left the Sentinel watcher running: {left}"
