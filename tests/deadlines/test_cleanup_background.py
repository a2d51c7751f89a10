"""Maybe-held locks are cleaned up in the background, and only as long as they can matter.

An acquire whose reply is lost may have taken the lock; the client owes a release with its
token. The promise: (1) it is made by the client itself once the server answers again, even if
the application makes no further call (within ``CLEANED_WITHIN`` of the resume); (2) it is
owed only while the lock could exist, its ttl: with the server still down, ``pending_cleanup``
falls to 0 about when the ttl runs out, and the calls made meanwhile keep their own budget
(no clean-up runs on top of them).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from _netfaults import Stopwatch, paused
from _raw import raw_connection
from turbolock import AcquireOutcomeUnknownError, ConnectionError, LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

from .conftest import Runner

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

T = 0.3
CLEANED_WITHIN = 3.0
SHORT_TTL = 1
KEPT_AT_MOST = SHORT_TTL + 0.5
"""How long after the lost acquire was sent a maybe-held lock of SHORT_TTL may stay pending."""


@pytest.fixture
def own_raw(own_server: RedisServer) -> Iterator[redis.Redis]:
    yield from raw_connection(own_server)


def _wait_cleaned(raw: redis.Redis, key: bytes, pending: Callable[[], int], resumed_at: float) -> None:
    """Until ``CLEANED_WITHIN`` after the resume: the key must be gone and nothing pending."""
    while True:
        exists = raw.exists(key)
        left = pending()
        if not exists and not left:
            time.sleep(0.1)  # still gone a moment later (not merely not yet written)
            if not raw.exists(key):
                return
        waited = time.monotonic() - resumed_at
        if waited > CLEANED_WITHIN:
            raise AssertionError(
                f"{waited:.2f}s after the server came back, with no further call, the maybe-held lock "
                f"is {'still on the server' if exists else 'gone'} and pending_cleanup is {left} "
                f"(budget {CLEANED_WITHIN}s: the client must release it in the background)")
        time.sleep(0.02)


def test_idle_client_cleans_up_after_the_server_returns(own_server: RedisServer, own_raw: redis.Redis,
                                                        core_name: str, key_prefix: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T,
                             connect_timeout=T) as client:
        assert client.query("warm-up").held is False
        with paused(own_server), pytest.raises(AcquireOutcomeUnknownError):
            client.try_acquire("maybe", 30)
        resumed_at = time.monotonic()
        _wait_cleaned(own_raw, client.key_prefix + b"maybe", lambda: client.pending_cleanup, resumed_at)


def test_async_idle_client_cleans_up_after_the_server_returns(arun_asyncio: Runner, own_server: RedisServer,
                                                              own_raw: redis.Redis, core_name: str,
                                                              key_prefix: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T,
                                            connect_timeout=T) as client:
            assert (await client.query("warm-up")).held is False
            with paused(own_server), pytest.raises(AcquireOutcomeUnknownError):
                await client.try_acquire("maybe", 30)
            resumed_at = time.monotonic()
            # The loop stays free for the client's own tasks; the test only looks.
            await asyncio.to_thread(_wait_cleaned, own_raw, client.key_prefix + b"maybe",
                                    lambda: client.pending_cleanup, resumed_at)

    arun_asyncio(body)


def _short_lived_verdict(watch: Stopwatch, dropped_at: float | None, sent_at: float, pending: int) -> None:
    if dropped_at is None:
        watch.problems.append(
            f"pending_cleanup was still {pending} {time.monotonic() - sent_at:.2f}s after the lost acquire "
            f"of a {SHORT_TTL}s lock (budget {KEPT_AT_MOST}s: it is owed only as long as the lock's ttl)")
    elif dropped_at - sent_at > KEPT_AT_MOST:
        watch.problems.append(
            f"pending_cleanup fell to 0 only {dropped_at - sent_at:.2f}s after the lost acquire of a "
            f"{SHORT_TTL}s lock (budget {KEPT_AT_MOST}s)")
    watch.check()


def test_a_maybe_held_lock_is_owed_only_for_its_ttl(own_server: RedisServer, core_name: str,
                                                    key_prefix: str) -> None:
    watch = Stopwatch()
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T,
                                 connect_timeout=T)
    try:
        assert client.query("warm-up").held is False
        with paused(own_server):
            sent_at = time.monotonic()
            out = watch.run("try_acquire", T, lambda: client.try_acquire("short", SHORT_TTL))
            watch.expect_raises(out, AcquireOutcomeUnknownError)
            dropped_at: float | None = None
            # Calls while the lock is pending, each with its own budget; then just watch the count.
            while time.monotonic() - sent_at < SHORT_TTL and client.pending_cleanup:
                out = watch.run("query (a maybe-held lock pending)", T, lambda: client.query("other"))
                watch.expect_raises(out, ConnectionError)
            while time.monotonic() - sent_at < KEPT_AT_MOST + 0.5:
                if not client.pending_cleanup:
                    dropped_at = time.monotonic()
                    break
                time.sleep(0.01)
            pending = client.pending_cleanup
    finally:
        client.close()
    _short_lived_verdict(watch, dropped_at, sent_at, pending)


def test_async_a_maybe_held_lock_is_owed_only_for_its_ttl(arun_asyncio: Runner, own_server: RedisServer,
                                                          core_name: str, key_prefix: str) -> None:
    watch = Stopwatch()

    async def body() -> tuple[float | None, float, int]:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T,
                                          connect_timeout=T)
        try:
            assert (await client.query("warm-up")).held is False
            with paused(own_server):
                sent_at = time.monotonic()
                out = await watch.arun("try_acquire", T, lambda: client.try_acquire("short", SHORT_TTL))
                watch.expect_raises(out, AcquireOutcomeUnknownError)
                while time.monotonic() - sent_at < SHORT_TTL and client.pending_cleanup:
                    out = await watch.arun("query (a maybe-held lock pending)", T,
                                           lambda: client.query("other"))
                    watch.expect_raises(out, ConnectionError)
                while time.monotonic() - sent_at < KEPT_AT_MOST + 0.5:
                    if not client.pending_cleanup:
                        return time.monotonic(), sent_at, 0
                    await asyncio.sleep(0.01)
                return None, sent_at, client.pending_cleanup
        finally:
            await client.close()

    dropped_at, sent_at, pending = arun_asyncio(body)
    _short_lived_verdict(watch, dropped_at, sent_at, pending)
