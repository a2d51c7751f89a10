"""close() while a Redlock call waits on a stopped majority (two of three masters SIGSTOPped, the
call written to all three): what it says must be true of a client that is closed (found in
review; both fronts).

- An acquire: the attempt fails (no quorum) and its give-back, through the closed client, does
  nothing: once the masters run again every one holds the name for its ttl, a quorum held by
  nobody. It was reported as a plain NO_QUORUM result (``acquire_many``) or a ``QuorumError``
  saying nothing of the locks left behind; now ``AcquireOutcomeUnknownError`` naming them, "may
  be held, expires by its ttl", as the one-server clients say.
- A release: ``QuorumError`` said "it is retried on those when they answer"; nothing retries on a
  closed client, and the lock stays on the stopped masters for its ttl. A threaded client's
  close() now serves the release and makes one more try at what it left owed, and says so
  (tests/redlock/test_redlock_close_serves_waiting_release.py).

On asyncio close() itself returns within a node timeout and leaves no task pending."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _in_thread import InThread
from turbolock import AcquireOutcomeUnknownError, ClientClosedError, LockError, RedlockClient
from turbolock._flows.redlock_rules import TRIED_AS_IT_CLOSES
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

NODE_TIMEOUT = 1.0
TTL = 30
NAMES = ["a", "b", "c"]


def _closed_mid_call(servers: list[RedisServer], front: str, core: str, prefix: str,
                     call: Callable[[Any, Any], Any]) -> BaseException | object:
    """``call(client, lease)`` (``lease``: "x" held, taken first) with two masters stopped and
    close() 0.2 s in: what it returned or raised."""
    options: dict[str, Any] = {"core": core, "key_prefix": prefix, "node_timeout": NODE_TIMEOUT}
    urls = [server.url for server in servers]
    if front == "threads":
        client = RedlockClient(urls, **options)
        lease = client.try_acquire("x", TTL)
        for server in servers[:2]:
            server.pause()
        try:
            worker = InThread(lambda: call(client, lease))
            time.sleep(0.2)  # written everywhere; two masters do not answer
            client.close()
            outcome = worker.join(5)
        finally:
            for server in servers[:2]:
                server.resume()
        assert outcome is not InThread.NOT_DONE, "the call did not end"
        return outcome

    async def main() -> object:
        client = AsyncRedlockClient(urls, **options)
        lease = await client.try_acquire("x", TTL)
        for server in servers[:2]:
            server.pause()
        try:
            task = asyncio.ensure_future(call(client, lease))
            await asyncio.sleep(0.2)
            started = time.monotonic()
            await client.close()
            assert time.monotonic() - started < NODE_TIMEOUT + 0.5, "close() waited on the stopped masters"
            await asyncio.wait([task], timeout=5)
            assert task.done(), "the call did not end"
            assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()], "tasks left"
            return task.exception() or task.result()
        finally:
            for server in servers[:2]:
                server.resume()

    return asyncio.run(main())


def _holding(servers: list[RedisServer], keys: list[str]) -> list[int]:
    """How many of ``keys`` each master holds, once what the resumed masters were sent has run."""
    time.sleep(0.5)
    raws = [redis.Redis(port=server.port) for server in servers]
    try:
        return [sum(1 for key in keys if raw.exists(key)) for raw in raws]
    finally:
        for raw in raws:
            raw.close()


@pytest.mark.parametrize("call", ["acquire_many", "try_acquire"])
@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_an_attempt_failed_by_close_names_what_it_leaves_held(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str, front: str,
        call: str) -> None:
    servers = own_masters(3)
    names = NAMES if call == "acquire_many" else ["a"]

    def acquire(client: Any, _: Any) -> Any:
        return client.acquire_many(names, TTL) if call == "acquire_many" else client.try_acquire("a", TTL)

    outcome = _closed_mid_call(servers, front, core_name, key_prefix, acquire)
    holding = _holding(servers, [key_prefix + name for name in names])
    left = sum(1 for count in holding if count == len(names))
    assert left >= 2, f"no quorum left held {holding}: the test proves nothing"
    assert isinstance(outcome, AcquireOutcomeUnknownError), f"{call} gave {outcome!r}; masters hold {holding}"
    assert sorted(outcome.names) == names and "expires by its ttl" in str(outcome), outcome


@pytest.mark.parametrize("call", ["release", "release_many"])
@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_release_cut_short_by_close_does_not_promise_a_retry(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str, front: str,
        call: str) -> None:
    servers = own_masters(3)

    def release(client: Any, lease: Any) -> Any:
        return client.release(lease) if call == "release" else client.release_many([lease])

    outcome = _closed_mid_call(servers, front, core_name, key_prefix, release)
    if front == "threads":  # close() served the release, then tried once more what it left owed
        assert isinstance(outcome, LockError) and TRIED_AS_IT_CLOSES in str(outcome), (
            f"{call} served by close() says {outcome!r}")
        return
    time.sleep(1.0)  # what a retry would need, were one coming (it takes < 0.5 s on an open client)
    holding = _holding(servers, [key_prefix + "x"])
    assert sum(holding) >= 2, f"the lock is gone from the stopped masters {holding}: proves nothing"
    assert isinstance(outcome, ClientClosedError) or "is retried" not in str(outcome), (
        f"{call} cut short by close() says {outcome!r}; nothing retries it, and masters {holding} hold it")
