"""A closed RedlockClient: a blocking acquire stops at once with ``ClientClosedError``, as on the
single-server client (tests/test_closed_client.py). The masters raised it, but the Redlock
attempt folded it into a no-quorum result its wait retried: a wait with a timeout ran the whole
of it, one without never ended (found by review). Every other call raises it too, before
anything is sent: they reported a ``QuorumError`` promising a retry a closed client never makes,
and a release marked its lease unlocked with nothing deleted (found in review)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from turbolock import ClientClosedError, RedlockClient
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer


@pytest.mark.parametrize("wait", [2.0, None], ids=["timeout", "endless"])
def test_a_blocking_redlock_acquire_on_a_closed_client_stops_at_once(
        three: list[RedisServer], core_name: str, key_prefix: str, wait: float | None) -> None:
    client = RedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
    assert client.query("free") is not None
    client.close()
    box: dict[str, Any] = {}

    def acquire() -> None:
        started = time.monotonic()
        try:
            box["result"] = client.lock("free", 5).acquire(timeout=wait)
        except BaseException as exc:
            box["result"] = exc
        box["took"] = time.monotonic() - started

    thread = threading.Thread(target=acquire, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "the blocking acquire on the closed Redlock client still waits after 5 s"
    assert box["took"] < 0.5 and isinstance(box["result"], ClientClosedError), box


def test_a_blocking_async_redlock_acquire_on_a_closed_client_stops_at_once(
        three: list[RedisServer], core_name: str, key_prefix: str) -> None:
    async def main() -> tuple[object, float]:
        client = AsyncRedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
        assert await client.query("free") is not None
        await client.close()
        started = time.monotonic()
        try:
            result: object = await client.lock("free", 5).acquire(timeout=2.0)
        except BaseException as exc:
            result = exc
        return result, time.monotonic() - started

    result, took = asyncio.run(main())
    assert took < 0.5 and isinstance(result, ClientClosedError), (result, took)


RETRY_DELAY = 4.0
"""Long retry delays: with 8 waiters, some are sure to be in one as the client closes."""


@pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the client's closing: no core's own
@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_close_ends_redlock_acquires_waiting_out_a_retry_delay(
        three: list[RedisServer], core_name: str, key_prefix: str, front: str) -> None:
    # They slept out their random delay (up to retry_delay) before finding the client closed
    # (found in review).
    urls = [s.url for s in three]
    holder = RedlockClient(urls, core=core_name, key_prefix=key_prefix)
    lease = holder.try_acquire("busy", 30)
    assert lease is not None
    ended: list[tuple[object, float]] = []

    def outcome_of(wait: Callable[[], object]) -> None:
        try:
            outcome = wait()
        except BaseException as exc:
            outcome = exc
        ended.append((outcome, time.monotonic()))

    if front == "threads":
        waiter = RedlockClient(urls, core=core_name, key_prefix=key_prefix, retry_delay=RETRY_DELAY)
        def wait() -> object:
            return waiter.acquire("busy", 30, timeout=None)

        threads = [threading.Thread(target=outcome_of, args=(wait,)) for _ in range(8)]
        for thread in threads:
            thread.start()
        time.sleep(0.3)  # each made its first attempt and waits out its delay
        waiter.close()
        closed_at = time.monotonic()
        for thread in threads:
            thread.join(RETRY_DELAY + 1)
    else:
        async def scenario() -> float:
            waiter = AsyncRedlockClient(urls, core=core_name, key_prefix=key_prefix, retry_delay=RETRY_DELAY)

            async def wait() -> None:
                try:
                    outcome: object = await waiter.acquire("busy", 30, timeout=None)
                except BaseException as exc:
                    outcome = exc
                ended.append((outcome, time.monotonic()))

            tasks = [asyncio.ensure_future(wait()) for _ in range(8)]
            await asyncio.sleep(0.3)
            await waiter.close()
            closed = time.monotonic()
            await asyncio.wait(tasks, timeout=RETRY_DELAY + 1)
            return closed

        closed_at = asyncio.run(scenario())
    holder.release(lease)
    holder.close()
    assert len(ended) == 8 and all(isinstance(outcome, ClientClosedError) for outcome, _ in ended), ended
    late = max(at for _, at in ended) - closed_at
    assert late < 0.1, f"a blocking Redlock acquire ended {late:.2f}s after close() returned"


CALLS = ["release", "release_many", "extend", "extend_many", "check", "query"]


def _call(client: Any, call: str, lease: Any) -> Any:
    if call == "release":
        return client.release(lease)
    if call == "release_many":
        return client.release_many([lease])
    if call == "extend":
        return client.extend(lease, 5)
    if call == "extend_many":
        return client.extend_many([lease], 5)
    if call == "check":
        return client.check(lease)
    return client.query("closed-seat")


@pytest.mark.parametrize("call", CALLS)
def test_every_call_on_a_closed_redlock_client_raises_client_closed(
        three: list[RedisServer], core_name: str, key_prefix: str, call: str) -> None:
    client = RedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
    lease = client.try_acquire("closed-seat", 10)
    assert lease is not None
    client.close()
    with pytest.raises(ClientClosedError):
        _call(client, call, lease)
    assert lease.status.value != "unlocked"


@pytest.mark.parametrize("call", CALLS)
def test_every_call_on_a_closed_async_redlock_client_raises_client_closed(
        three: list[RedisServer], core_name: str, key_prefix: str, call: str) -> None:
    async def main() -> None:
        client = AsyncRedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
        lease = await client.try_acquire("closed-seat", 10)
        assert lease is not None
        await client.close()
        with pytest.raises(ClientClosedError):
            await _call(client, call, lease)

    asyncio.run(main())


def test_a_claim_of_no_names_on_a_closed_redlock_client_raises(three: list[RedisServer], core_name: str,
                                                                key_prefix: str) -> None:
    """``acquire_many([], limit=k)`` returned an empty result: the claim never reached the check."""
    client = RedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
    client.close()
    for limit in (None, 1):
        with pytest.raises(ClientClosedError):
            client.acquire_many([], 10, limit=limit)
