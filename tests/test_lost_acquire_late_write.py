"""An acquire whose reply was lost can still run after the client's background release of it:
its command was on its way to the server on the connection the client gave up (here a proxy
holds it back for a second, and delivers it after the client closed that connection, as TCP
delivers what was sent before a close). The first release answers 0, the command then takes
the lock, and nobody releases it before its ttl. The cleanup releases such a lock again a
little later (``CleanupBook``'s ``RECHECK_AFTER``) when its token is one the client made; a
lock acquired with a token the caller gave is not released again (the caller may acquire
with it again), and stays until its ttl.

Both fronts, a single acquire, a bulk one and a claim (``limit=k``), and an asyncio acquire
cancelled after its write whose connection then failed. The control turns the second release
off and must find the lock still held.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually, eventually_async
from _netfaults import FaultProxy
from turbolock import AcquireOutcomeUnknownError
from turbolock._flows import cleanup_book
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

HELD_BACK = 1.0  # how long the proxy holds the acquire back: past the first release, and the first recheck
TTL = 60


@pytest.fixture
def proxy(own_server: RedisServer) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", own_server.port) as started:
        started.deliver_after_close = True
        yield started


def _acquire_late(client: Any, proxy: FaultProxy, bulk: bool, token: bytes | None) -> list[str]:
    """An acquire the proxy holds back past the client's timeout; the names it tried."""
    names = [f"seat:{i}" for i in range(50)] if bulk else ["seat"]
    assert client.query("warm-up").held is False  # the connection the acquire will go out on
    proxy.delay(HELD_BACK, to_client=False)
    try:
        with pytest.raises(AcquireOutcomeUnknownError):
            if bulk:
                client.acquire_many(names, TTL, tokens=None if token is None else [token] * len(names))
            else:
                client.try_acquire(names[0], TTL, token=token)
    finally:
        proxy.heal()  # the cleanup's new connection goes through at once; the held bytes still go
    return names


def _held(raw: redis.Redis, prefix: str, names: list[str]) -> int:
    return sum(1 for value in raw.mget([prefix + name for name in names]) if value is not None)


@pytest.fixture
def raw(own_server: RedisServer) -> Iterator[redis.Redis]:
    with redis.Redis(port=own_server.port) as made:
        yield made


@pytest.fixture(params=FRONTS)
def client(request: pytest.FixtureRequest, proxy: FaultProxy, core_name: str,
           key_prefix: str) -> Iterator[Any]:
    """A client (threads or asyncio) through the proxy, with a call timeout well under ``HELD_BACK``."""
    fronts = Fronts.at(request.param, proxy.url, core=core_name, key_prefix=key_prefix, timeout=0.3)
    yield fronts.make()
    fronts.close()


@pytest.mark.parametrize("bulk", [False, True], ids=["single", "bulk"])
def test_a_lost_acquire_that_runs_after_its_release_is_released_again(
        client: Any, proxy: FaultProxy, raw: redis.Redis, key_prefix: str, bulk: bool) -> None:
    started = time.monotonic()
    names = _acquire_late(client, proxy, bulk, None)
    assert eventually(lambda: _held(raw, key_prefix, names) == len(names), HELD_BACK + 2), \
        "the held-back acquire never reached the server"
    assert eventually(lambda: _held(raw, key_prefix, names) == 0, sum(cleanup_book.RECHECK_AFTER) + 2), \
        f"{_held(raw, key_prefix, names)} of the late acquire's locks were not released again"
    assert time.monotonic() - started < TTL / 2  # released, not expired


@pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the cleanup book's rule: no core's own
def test_without_the_second_release_the_late_acquire_keeps_its_lock(
        client: Any, proxy: FaultProxy, raw: redis.Redis, key_prefix: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: no release after the first (as before ``RECHECK_AFTER``) leaves the lock held."""
    rechecks_over = sum(cleanup_book.RECHECK_AFTER) + 1
    monkeypatch.setattr(cleanup_book, "RECHECK_AFTER", ())
    names = _acquire_late(client, proxy, False, None)
    assert eventually(lambda: _held(raw, key_prefix, names) == 1, HELD_BACK + 2)
    time.sleep(rechecks_over)
    assert _held(raw, key_prefix, names) == 1
    assert client.pending_cleanup == 0


@pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the cleanup book's rule: no core's own
def test_a_lock_taken_with_a_given_token_is_not_released_again(
        client: Any, proxy: FaultProxy, raw: redis.Redis, key_prefix: str) -> None:
    """A caller-given token may be used again (a retry of the same acquire): a later release
    with it could delete the lock that retry took, so none is made after the first answer."""
    token = b"caller-token-0001"
    names = _acquire_late(client, proxy, False, token)
    assert eventually(lambda: _held(raw, key_prefix, names) == 1, HELD_BACK + 2)
    time.sleep(sum(cleanup_book.RECHECK_AFTER) + 1)
    assert raw.get(key_prefix + names[0]) == token


def test_a_lost_claim_that_runs_after_its_release_is_released_again(
        client: Any, proxy: FaultProxy, raw: redis.Redis, key_prefix: str) -> None:
    names = [f"shard:{i}" for i in range(20)]
    warm = client.acquire_many(["warm:a", "warm:b"], TTL, limit=1)  # loads the claim script
    assert len(warm.acquired) == 1 and all(client.release_many(warm.acquired))
    proxy.delay(HELD_BACK, to_client=False)
    try:
        with pytest.raises(AcquireOutcomeUnknownError):
            client.acquire_many(names, TTL, limit=5)
    finally:
        proxy.heal()
    assert eventually(lambda: _held(raw, key_prefix, names) == 5, HELD_BACK + 2), \
        "the held-back claim never reached the server"
    assert eventually(lambda: _held(raw, key_prefix, names) == 0, sum(cleanup_book.RECHECK_AFTER) + 2), \
        f"{_held(raw, key_prefix, names)} locks of the late claim were not released again"


def test_a_cancelled_acquire_whose_connection_then_failed_is_released_again(
        proxy: FaultProxy, raw: redis.Redis, core_name: str, key_prefix: str) -> None:
    """asyncio: an acquire cancelled after its write; the connection then fails at its deadline
    (the reply lost) and the command reaches the server after the background release."""
    key = key_prefix + "seat"

    async def scenario() -> tuple[bool, bool]:
        client = AsyncLockClient.from_url(proxy.url, core=core_name, key_prefix=key_prefix, timeout=0.3)
        try:
            assert (await client.query("warm-up")).held is False
            proxy.delay(HELD_BACK, to_client=False)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.try_acquire("seat", TTL), 0.1)  # cancelled once written
            await asyncio.sleep(0.4)  # the connection's deadline fails it: the orphan's reply is lost
            proxy.heal()
            reached = await eventually_async(lambda: bool(raw.exists(key)), HELD_BACK + 2)
            rechecks = sum(cleanup_book.RECHECK_AFTER)
            released = await eventually_async(lambda: not raw.exists(key), rechecks + 2)
            return reached, released
        finally:
            await client.close()

    reached, released = asyncio.run(scenario())
    assert reached, "the held-back acquire never reached the server"
    assert released, "the late acquire's lock was not released again"


