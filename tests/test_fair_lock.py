"""``lock(..., fair=True)``: waiters take the lock strictly in the order they first asked.

Waiters in several OS processes queue up one after the other behind a held lock; once it is
released, the grants must follow the queue. The control runs the same waiters unfair and
without wake-ups (each polls with its own backoff): their order then comes out otherwise.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _eventually import eventually
from _netfaults import FaultProxy
from turbolock import InvalidArgumentError, InvalidArgumentTypeError, LockClient, LockError
from turbolock._flows.lock_flows import SingleLockFlows
from turbolock._wire.fair_scripts import FAIR_ACQUIRE, PATIENCE_MS
from turbolock._wire.outcomes import Unconfirmed
from turbolock._wire.scripts import Script
from turbolock.errors import TimeoutError as TLTimeout
from turbolock.redis_server import RedisServer

WAITERS = 8


def _wait_and_record(url: str, core: str, prefix: str, name: str, who: int, fair: bool) -> None:
    """A waiter process: take the lock (fair, or polling unfair), note who had it, hold briefly."""
    with LockClient.from_url(url, core=core, key_prefix=prefix, wake_waiters=fair) as client:
        lock = client.lock(name, 10, fair=fair)
        if not lock.acquire(timeout=30):
            os._exit(3)
        raw = redis.Redis.from_url(url)
        raw.rpush(prefix + "grants", who)
        time.sleep(0.02)
        lock.release()
        raw.close()


def _queue(raw: redis.Redis, prefix: str | bytes, name: str, part: str = "queue") -> list[bytes]:
    """The waiters in the name's queue."""
    base = (prefix if isinstance(prefix, bytes) else prefix.encode()) + name.encode()
    return raw.zrange(b"{" + base + b"}:" + part.encode(), 0, -1)


def _start(url: str, core: str, prefix: str, name: str, who: int, fair: bool) -> Any:
    process = multiprocessing.get_context("fork").Process(
        target=_wait_and_record, args=(url, core, prefix, name, who, fair), daemon=True)
    process.start()
    return process


def _queue_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fault a fair lock guards against, put in: its waiting attempt takes a free lock
    whoever is ahead in the queue (the waiter processes, forked after this, inherit it)."""
    script = FAIR_ACQUIRE[True, False]
    source = script.source.replace(b"if (not head or head == waiter) and not holder", b"if not holder")
    assert source != script.source
    ignoring = Script("fair_wait_queue_ignored", source, script.own_keys)
    monkeypatch.setitem(FAIR_ACQUIRE, (True, False), ignoring)


@pytest.mark.parametrize("mode", ["fair", "unfair", "queue-ignored"])
def test_waiters_in_several_processes_get_the_lock_in_the_order_they_came(
        redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis, mode: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Two controls: waiters that are not fair (each polls with its own backoff), and fair ones
    # whose script ignores the queue; both must come out of order.
    fair = mode != "unfair"
    if mode == "queue-ignored":
        _queue_ignored(monkeypatch)
    url = redis_server.url
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
        holder = client.lock("sale", 30, fair=fair)
        assert holder.acquire()
        processes = []
        for who in range(WAITERS):
            processes.append(_start(url, core_name, key_prefix, "sale", who, fair))
            if fair:  # it has its place before the next one comes
                assert eventually(lambda who=who: len(_queue(raw, key_prefix, "sale")) == who + 1, 10.0)
            else:  # it has found the lock held and backs off (the earlier ones back off longer)
                time.sleep(0.15)
        holder.release()
        for process in processes:
            process.join(60)
            assert process.exitcode == 0
    grants = [int(who) for who in raw.lrange(key_prefix + "grants", 0, -1)]
    assert sorted(grants) == list(range(WAITERS))
    if mode == "fair":
        assert grants == list(range(WAITERS))
        assert _queue(raw, key_prefix, "sale") == []
        assert not raw.exists(("{" + key_prefix + "sale}:asked").encode())
    else:
        assert grants != list(range(WAITERS)), "the control must come out of order"


def test_a_holder_that_takes_the_lock_again_queues_behind_the_waiters(make_client: Callable[..., Any],
                                                                     raw: redis.Redis) -> None:
    client = make_client()
    greedy = client.lock("shard", 10, fair=True)
    assert greedy.acquire()
    waiters = [client.lock("shard", 10, fair=True) for _ in range(3)]
    got: list[int] = []

    def wait(i: int) -> None:
        assert waiters[i].acquire(timeout=10)
        got.append(i)
        waiters[i].release()

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(3)]
    for i, thread in enumerate(threads):
        thread.start()
        assert eventually(lambda i=i: len(_queue(raw, client.key_prefix, "shard")) == i + 1, 10.0)
    greedy.release()
    assert greedy.acquire(timeout=10)  # asks at once: it is fourth
    for thread in threads:
        thread.join(10)
    assert got == [0, 1, 2], "every waiter had the lock before the holder had it again"
    greedy.release()


def test_a_try_succeeds_only_when_nobody_waits(make_client: Callable[..., Any], raw: redis.Redis) -> None:
    client = make_client()
    holder = client.lock("form", 10, fair=True)
    assert holder.acquire()
    waiter = client.lock("form", 10, fair=True)
    assert not waiter.acquire(timeout=0.2)  # it came, waited, left (in the background)
    assert eventually(lambda: _queue(raw, client.key_prefix, "form") == [], 5.0)
    holder.release()
    assert client.lock("form", 10, fair=True).acquire(blocking=False)


def test_a_wait_that_ends_leaves_the_queue_control(make_client: Callable[..., Any], raw: redis.Redis,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Without leaving, the place stays (until the others' patience drops it) and blocks a try.
    monkeypatch.setattr(SingleLockFlows, "_leave_queue", _stay)
    client = make_client()
    holder = client.lock("form", 10, fair=True)
    assert holder.acquire()
    assert not client.lock("form", 10, fair=True).acquire(timeout=0.2)
    time.sleep(0.2)  # what a leave would have done by now
    assert len(_queue(raw, client.key_prefix, "form")) == 1
    holder.release()
    assert not client.lock("form", 10, fair=True).acquire(blocking=False)


def _stay(*_: object) -> Any:
    """``_leave_queue`` that leaves nothing: the fault the leave tests' controls put in."""
    return
    yield


@pytest.mark.timing
def test_a_waiter_that_died_in_the_queue_is_passed_over(redis_server: RedisServer, core_name: str,
                                                        key_prefix: str, raw: redis.Redis) -> None:
    url = redis_server.url
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
        holder = client.lock("job", 30, fair=True)
        assert holder.acquire()
        dead = _start(url, core_name, key_prefix, "job", 0, True)
        assert eventually(lambda: len(_queue(raw, key_prefix, "job")) == 1, 10.0)
        alive = _start(url, core_name, key_prefix, "job", 1, True)
        assert eventually(lambda: len(_queue(raw, key_prefix, "job")) == 2, 10.0)
        os.kill(dead.pid, signal.SIGKILL)
        dead.join(5)
        released = time.monotonic()
        holder.release()
        alive.join(30)
        waited = time.monotonic() - released
    assert alive.exitcode == 0
    assert [int(who) for who in raw.lrange(key_prefix + "grants", 0, -1)] == [1]
    # The dead one's place goes once it has not asked for PATIENCE_MS; the live one asks again
    # within its longest pause (0.2 s).
    assert waited < PATIENCE_MS / 1000 + 0.5


def test_fair_arguments_are_checked(make_client: Callable[..., Any]) -> None:
    client = make_client()
    with pytest.raises(InvalidArgumentTypeError, match="fair"):
        client.lock("x", 10, fair="yes")
    with pytest.raises(InvalidArgumentError, match="token"):
        client.lock("x", 10, fair=True, token=b"t" * 16)
    with pytest.raises(InvalidArgumentError, match="name"):
        client.lock("a}b", 10, fair=True)
    assert client.lock("{a}b}", 10, fair=True).fair  # a hash tag keeps the queue in the slot
    with pytest.raises(InvalidArgumentError, match="fair"):
        make_client(replicas_ack=1).lock("x", 10, fair=True)


def test_a_fair_lock_can_be_fenced(make_client: Callable[..., Any]) -> None:
    client = make_client()
    lock = client.lock("fenced", 10, fair=True, fenced=True)
    assert lock.acquire()
    first = lock.fence
    lock.release()
    assert lock.acquire()
    assert first is not None and lock.fence == first + 1
    lock.release()


class _LosesOneTake:
    """An executor whose first fair attempt that takes the lock loses its reply (it ran)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.lost = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def script_one(self, script: Any, key: bytes, token: bytes, ttl_ms: Any, deadline: Any = None) -> object:
        reply = self._inner.script_one(script, key, token, ttl_ms, deadline)
        if script in FAIR_ACQUIRE.values() and reply == b"OK" and not self.lost:
            self.lost += 1
            raise Unconfirmed(TLTimeout("reply lost (injected)"))
        return reply


def test_a_lost_reply_on_the_heads_take_keeps_its_turn(redis_server: RedisServer, key_prefix: str,
                                                       raw: redis.Redis) -> None:
    # A's winning attempt ran but its reply was lost: its next attempt finds the lock its own
    # (nothing released it meanwhile) instead of queueing behind B.
    url = redis_server.url
    got: list[str] = []
    with LockClient.from_url(url, key_prefix=key_prefix) as c0, \
            LockClient.from_url(url, key_prefix=key_prefix) as ca, \
            LockClient.from_url(url, key_prefix=key_prefix) as cb:
        lossy = _LosesOneTake(ca._exec)
        ca._exec = lossy  # type: ignore[assignment]
        holder = c0.lock("fifo", 10, fair=True)
        assert holder.acquire()

        def wait(client: LockClient, who: str) -> None:
            lock = client.lock("fifo", 10, fair=True)
            assert lock.acquire(timeout=20)
            got.append(who)
            time.sleep(0.05)
            lock.release()

        a = threading.Thread(target=wait, args=(ca, "A"))
        a.start()
        assert eventually(lambda: len(_queue(raw, key_prefix, "fifo")) == 1, 10.0)
        b = threading.Thread(target=wait, args=(cb, "B"))
        b.start()
        assert eventually(lambda: len(_queue(raw, key_prefix, "fifo")) == 2, 10.0)
        holder.release()
        a.join(20)
        b.join(20)
    assert lossy.lost == 1
    assert got == ["A", "B"], f"A came first but was served {got}"


@pytest.mark.parametrize("fair", [True, False], ids=["fair", "plain"])
def test_a_try_on_a_free_lock_over_a_slow_link_takes_it(redis_server: RedisServer, key_prefix: str,
                                                       fair: bool) -> None:
    # One-way delay 2.5 ms each way: a round trip of 5 ms, well inside the 5 s call timeout.
    with FaultProxy(redis_server.host, redis_server.port) as proxy:
        with LockClient(proxy.host, proxy.port, key_prefix=key_prefix) as client:
            assert client.query("warm-up").held is False  # connected
            proxy.delay(0.0025)
            lock = client.lock("free", 10, fair=fair)
            started = time.monotonic()
            try:
                got: object = lock.acquire(blocking=False)
            except LockError as exc:
                got = exc
            elapsed = time.monotonic() - started
            assert got is True, f"a try on a free lock gave {got!r} after {elapsed * 1000:.1f} ms"


@pytest.mark.timing
def test_live_waiters_keep_their_order_across_a_server_stall_past_patience(own_server: RedisServer,
                                                                           key_prefix: str) -> None:
    # Four live waiters queue 0, 1, 2, 3 behind a holder; the server then stalls for 3.5 s (a
    # CLIENT PAUSE as FAILOVER does, a slow script, a fork on a big dataset): nobody could ask.
    url = own_server.url
    raw = redis.Redis.from_url(url)
    clients = [LockClient.from_url(url, key_prefix=key_prefix) for _ in range(5)]
    got: list[int] = []
    try:
        holder = clients[4].lock("stall", 30, fair=True)
        assert holder.acquire()

        def wait(i: int) -> None:
            lock = clients[i].lock("stall", 30, fair=True)
            assert lock.acquire(timeout=30)
            got.append(i)
            time.sleep(0.02)
            lock.release()

        threads = [threading.Thread(target=wait, args=(i,)) for i in range(4)]
        for i, thread in enumerate(threads):
            thread.start()
            assert eventually(lambda i=i: len(_queue(raw, key_prefix, "stall")) == i + 1, 10.0)
        before = _queue(raw, key_prefix, "stall")
        raw.execute_command("CLIENT", "PAUSE", 3500, "WRITE")
        time.sleep(4.0)
        after = _queue(raw, key_prefix, "stall")
        holder.release()
        for thread in threads:
            thread.join(30)
    finally:
        for c in clients:
            c.close()
        raw.close()
    assert after == before, f"queue order changed across the stall: {before} -> {after}; served {got}"
    assert got == [0, 1, 2, 3]


def test_one_cleanup_pass_releases_and_leaves(client: LockClient, raw: redis.Redis) -> None:
    # A maybe-held lock and a fair waiter that gave up, pending together: the background cleanup
    # releases the one (with its token only) and takes the other out of its queue.
    prefix = client.key_prefix
    raw.set(prefix + b"maybe", b"m" * 16, px=30_000)
    raw.set(prefix + b"other", b"o" * 16, px=30_000)
    client._remember_cleanup(b"maybe", b"m" * 16, time.monotonic() + 30)
    client._remember_cleanup(b"other", b"x" * 16, time.monotonic() + 30)  # not its token: stays
    holder = client.lock("form", 10, fair=True)
    assert holder.acquire()
    assert not client.lock("form", 10, fair=True).acquire(timeout=0.1)
    assert eventually(lambda: client.pending_cleanup == 0, 5.0)
    assert raw.get(prefix + b"maybe") is None and raw.get(prefix + b"other") == b"o" * 16
    assert _queue(raw, prefix, "form") == []
    holder.release()
