"""Waking on release: a blocking acquire that finds its lock held is woken by the release (the
release script publishes on the key, the client's one subscriber connection hears it), on
threads and asyncio, both cores. Polling stays the safety net: a holder that crashed, a server
that refuses subscriptions, a subscriber connection killed mid-wait."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from _waking import PROMPT, acquire_in_thread, handover_delays, stop_polling
from turbolock import LockError
from turbolock._flows import keepalive, lock_rules
from turbolock._flows.backoff import Backoff
from turbolock.asyncio import AsyncLockClient
from turbolock.client import LockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own


@pytest.fixture
def no_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    stop_polling(monkeypatch)


def test_a_release_wakes_the_waiter_at_once(make_client: Callable[..., Any]) -> None:
    client = make_client()
    delays = handover_delays(client, 5)
    assert max(delays) < PROMPT, delays


def test_control_without_waking_the_waiter_finds_out_by_polling(make_client: Callable[..., Any],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # The negative control of the test above: the same hand-overs, waiters polling only, every
    # 250 ms exactly (not jittered, so the control cannot pass by luck). Released 300 ms into
    # the wait, the lock is found free by the poll at 500 ms.
    monkeypatch.setattr(lock_rules, "Backoff", partial(Backoff, initial=0.25, maximum=0.25, floor=1.0))
    client = make_client(wake_waiters=False)
    delays = handover_delays(client, 3)
    assert min(delays) >= PROMPT, delays


def test_a_release_just_before_the_subscription_is_not_missed(make_client: Callable[..., Any],
                                                               raw: redis.Redis, key_prefix: str,
                                                               no_polling: None) -> None:
    # The lock is released after the waiter's failed attempt and before its subscription: the
    # message goes out to nobody. The waiter must still take it, by the attempt it makes once
    # subscribed (it would otherwise wait for a poll that this test has put off).
    client = make_client()
    holder = make_client()
    held = holder.try_acquire("gap", 30)
    assert held is not None
    target = client._target if hasattr(client, "_target") else client
    join = target._wake_join
    released: list[float] = []

    def release_then_join(key: bytes, deadline: float) -> Any:
        assert raw.delete(key_prefix + "gap") == 1  # by hand: no message is published
        released.append(time.monotonic())
        return join(key, deadline)

    target._wake_join = release_then_join
    waiter = client.lock("gap", 30)
    assert waiter.acquire(timeout=5)
    assert released and time.monotonic() - released[0] < 1.0
    waiter.release()


def test_a_bulk_release_wakes_the_waiters_of_its_names(make_client: Callable[..., Any],
                                                      no_polling: None) -> None:
    client = make_client()
    held = client.acquire_many(["bulk0", "bulk1", "bulk2"], 30).acquired
    assert len(held) == 3
    waiting = [acquire_in_thread(client.lock(name, 30), 10) for name in ("bulk0", "bulk2")]
    time.sleep(0.3)
    released = time.monotonic()
    assert client.release_many(held) == [True, True, True]
    for thread, done in waiting:
        thread.join(10)
        assert done and done[0] - released < PROMPT, done


def test_one_release_wakes_one_waiter_in_arrival_order(make_client: Callable[..., Any],
                                                       no_polling: None) -> None:
    client = make_client()
    held = client.try_acquire("queue", 30)
    assert held is not None
    order: list[int] = []
    threads = []
    for index in range(5):
        lock = client.lock("queue", 30)

        def take(lock: Any = lock, index: int = index) -> None:
            if lock.acquire(timeout=20):
                order.append(index)
                time.sleep(0.02)
                lock.release()

        thread = threading.Thread(target=take, daemon=True)
        thread.start()
        threads.append(thread)
        time.sleep(0.1)  # each one waits before the next arrives
    started = time.monotonic()
    assert client.release(held)
    for thread in threads:
        thread.join(20)
    elapsed = time.monotonic() - started
    assert order == [0, 1, 2, 3, 4]
    # Polling is off: only wake-ups handed the lock over, one per release, each at once.
    assert elapsed < 5 * (0.02 + PROMPT), elapsed


def test_the_subscriber_connection_killed_mid_wait_comes_back(make_client: Callable[..., Any],
                                                              raw: redis.Redis, key_prefix: str,
                                                              no_polling: None) -> None:
    client = make_client()
    held = client.try_acquire("killed", 30)
    assert held is not None
    waiter = client.lock("killed", 30)
    thread, done = acquire_in_thread(waiter, 20)
    channel = (key_prefix + "killed").encode()
    assert eventually(lambda: raw.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] == 1, 5)
    assert raw.client_kill_filter(_type="pubsub") >= 1
    # The subscriber connects again and subscribes again to the key still waited for.
    assert eventually(lambda: raw.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] == 1, 5)
    time.sleep(0.05)
    released = time.monotonic()
    assert client.release(held)
    thread.join(10)
    assert done and done[0] - released < PROMPT, done
    waiter.release()


@pytest.mark.parametrize("front", FRONTS)
def test_a_silent_subscriber_connection_is_made_again(front: str, own_server: RedisServer, core_name: str,
                                                      key_prefix: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A server that stops answering (SIGSTOP stands in for a vanished host): the subscriber's
    # PING goes unanswered, the connection is dropped and made again once the server is back,
    # and the waiter is woken by the release after that.
    monkeypatch.setattr(keepalive, "PING_AFTER", 0.2)
    stop_polling(monkeypatch)
    url = own_server.url
    fronts = Fronts(front, partial(LockClient.from_url, url), partial(AsyncLockClient.from_url, url),
                    core=core_name, key_prefix=key_prefix, timeout=0.5, connect_timeout=0.5)
    try:
        client = fronts.make()
        held = client.try_acquire("silent", 30)
        assert held is not None
        thread, done = acquire_in_thread(client.lock("silent", 30), 20)
        key = (key_prefix + "silent").encode()
        assert eventually(lambda: client._waker().book.subscribed(key), 5)
        assert client._waker().connects == 1
        own_server.pause()
        time.sleep(1.5)
        own_server.resume()
        assert eventually(lambda: client._waker().connects >= 2 and client._waker().book.subscribed(key), 10)
        released = time.monotonic()
        assert client.release(held)
        thread.join(10)
        assert done and done[0] - released < PROMPT, done
    finally:
        fronts.close()


@pytest.mark.parametrize("front", FRONTS)
def test_a_wait_keeps_its_deadline_when_the_server_stops_as_it_subscribes(
        front: str, own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    # The lock is found held, then the server stops answering just before the subscription:
    # the subscriber cannot connect, and acquire(timeout=0.5) still returns by its deadline.
    url = own_server.url
    fronts = Fronts(front, partial(LockClient.from_url, url), partial(AsyncLockClient.from_url, url),
                    core=core_name, key_prefix=key_prefix, timeout=2.0, connect_timeout=2.0)
    try:
        client = fronts.make()
        assert client.try_acquire("stopped", 30) is not None
        target = client._target if hasattr(client, "_target") else client
        join = target._wake_join

        def stop_then_join(key: bytes, deadline: float) -> Any:
            own_server.pause()
            return join(key, deadline)

        target._wake_join = stop_then_join
        lock = client.lock("stopped", 30)
        started = time.monotonic()
        try:
            acquired = lock.acquire(timeout=0.5)
        except LockError:  # a ConnectionError or TimeoutError of an attempt is allowed too
            acquired = False
        elapsed = time.monotonic() - started
        assert not acquired
        assert elapsed < 0.5 + 0.15, elapsed
    finally:
        own_server.resume()
        fronts.close()


def test_a_crashed_holder_is_outwaited_by_polling(make_client: Callable[..., Any], redis_server: RedisServer,
                                                  key_prefix: str) -> None:
    # A holder process killed with the lock: no release, no message. The waiter takes the lock
    # once its ttl ran out, within one poll pause (at most 200 ms) of the expiry.
    ttl = 0.8
    holder = subprocess.Popen([sys.executable, "-c", (
        "import os, signal, sys\n"
        "from turbolock import LockClient\n"
        f"c = LockClient(port={redis_server.port}, key_prefix={key_prefix!r})\n"
        f"assert c.try_acquire('crash', {ttl}) is not None\n"
        "print('held', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    held_at = time.monotonic()
    holder.wait(10)
    client = make_client()
    waiter = client.lock("crash", 30)
    assert waiter.acquire(timeout=5)
    waited = time.monotonic() - held_at
    assert ttl - 0.05 < waited < ttl + 0.2 + 0.1, waited
    waiter.release()


def test_waiters_that_give_up_leave_no_ticket_and_few_subscriptions(make_client: Callable[..., Any],
                                                                   raw: redis.Redis, key_prefix: str) -> None:
    client = make_client()
    names = [f"idle{i}" for i in range(6)]
    held = [client.try_acquire(name, 30) for name in names]
    assert all(held)
    client._waker().book.idle_limit = 2
    threads = [acquire_in_thread(client.lock(name, 30), 0.3)[0] for name in names]
    for thread in threads:
        thread.join(10)
    book = client._waker().book
    assert book.waiting == 0 and not book.queues
    channels = [(key_prefix + name).encode() for name in names]

    def subscribed() -> int:
        counts = raw.execute_command("PUBSUB", "SHARDNUMSUB", *channels)
        return sum(counts[1::2])

    assert eventually(lambda: subscribed() == 2, 5)  # the two most recent idle keys stay subscribed
    for lease in held:
        assert client.release(lease)


def test_close_drops_the_subscriptions(make_client: Callable[..., Any], raw: redis.Redis,
                                       key_prefix: str) -> None:
    client = make_client()
    held = client.try_acquire("closing", 30)
    assert held is not None
    assert not client.lock("closing", 30).acquire(timeout=0.2)
    channel = (key_prefix + "closing").encode()
    assert raw.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] == 1
    client.close()
    assert eventually(lambda: raw.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] == 0, 5)


def test_a_user_without_channel_permissions_still_acquires_by_polling(
        own_server: RedisServer, core_name: str, key_prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    # Redis 7's default for a new user is no channel at all: SSUBSCRIBE is refused, and so is
    # the release script's SPUBLISH (which must not fail the release).
    admin = redis.Redis(port=own_server.port)
    admin.execute_command("ACL", "SETUSER", "nochannels", "on", ">secret", "~*", "+@all", "resetchannels")
    client = LockClient(port=own_server.port, username="nochannels", password="secret", core=core_name,
                        key_prefix=key_prefix)
    try:
        held = client.try_acquire("acl", 30)
        assert held is not None
        waiter = client.lock("acl", 30)
        with caplog.at_level(logging.WARNING, logger="turbolock"):
            thread, done = acquire_in_thread(waiter, 10)
            time.sleep(0.3)
            released = time.monotonic()
            assert client.release(held)
            thread.join(10)
        assert done and done[0] - released < 0.25, done  # one poll pause at most
        assert any("refused to subscribe" in record.getMessage() for record in caplog.records)
        assert "secret" not in caplog.text
        waiter.release()
    finally:
        client.close()
        admin.close()
