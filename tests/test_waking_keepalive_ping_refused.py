"""``+ping`` is optional for an ACL user (README): the subscriber's keepalive PING (after 15 s of
quiet, shortened here) refused with NOPERM is an answer, and waking goes on. The wake book took
that error for a refused subscription: "refused to subscribe to lock releases" was logged, and
the waiters polled (50-200 ms) from then on instead of being woken. The same user with ``+ping``
alongside. Found in review."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from turbolock import LockClient
from turbolock._flows import keepalive, lock_rules
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the book is one for both

PASSWORD = "Ping-Secret-Pa55"
MINIMUM = "+set +pttl +evalsha +script|load +get +del +pexpire"
WAKING = "&* +ssubscribe +sunsubscribe +spublish"
QUIET = 1.0  # > the shortened PING_AFTER: the keepalive PING goes out while the waiter waits


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    users = [f"user noping on >{PASSWORD} ~turbolock:* -@all {MINIMUM} {WAKING}",
             f"user control on >{PASSWORD} ~turbolock:* -@all {MINIMUM} {WAKING} +ping"]
    with RedisServer(extra_config=users) as made:
        yield made


@pytest.fixture(autouse=True)
def quick_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keepalive, "PING_AFTER", 0.3)
    monkeypatch.setattr(lock_rules, "WOKEN_POLL_FIRST", 30.0)  # only a wake-up hands over
    monkeypatch.setattr(lock_rules, "WOKEN_POLL_MAX", 30.0)


def _url(server: RedisServer, user: str) -> str:
    return f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0"


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refused to subscribe" in r.getMessage()]


@pytest.mark.parametrize("user", ["control", "noping"])
def test_waking_survives_a_refused_keepalive_ping(server: RedisServer, core_name: str, user: str,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="turbolock")
    prefix = f"turbolock:{uuid.uuid4().hex[:10]}:"
    with LockClient.from_url(_url(server, user), core=core_name, key_prefix=prefix) as client:
        held = client.try_acquire("w", 30)
        assert held is not None
        waiter = client.lock("w", 30)
        done: list[float] = []
        thread = threading.Thread(target=lambda: waiter.acquire(timeout=QUIET + 3) and
                                  done.append(time.monotonic()), daemon=True)
        thread.start()
        time.sleep(QUIET)
        released = time.monotonic()
        assert client.release(held)
        thread.join(QUIET + 5)
        assert not _refusals(caplog), _refusals(caplog)
        assert done and done[0] - released < 1.0, "the release did not wake the waiter"
        waiter.release()


@pytest.mark.parametrize("user", ["control", "noping"])
def test_async_waking_survives_a_refused_keepalive_ping(server: RedisServer, core_name: str, user: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="turbolock")
    prefix = f"turbolock:{uuid.uuid4().hex[:10]}:"

    async def main() -> float | None:
        async with AsyncLockClient.from_url(_url(server, user), core=core_name, key_prefix=prefix) as client:
            held = await client.try_acquire("w", 30)
            assert held is not None
            waiter = client.lock("w", 30)
            task = asyncio.ensure_future(waiter.acquire(timeout=QUIET + 3))
            await asyncio.sleep(QUIET)
            released = time.monotonic()
            assert await client.release(held)
            if await task:
                await waiter.release()
                return time.monotonic() - released
            return None

    delay = asyncio.run(main())
    assert not _refusals(caplog), _refusals(caplog)
    assert delay is not None and delay < 1.0, "the release did not wake the waiter"
