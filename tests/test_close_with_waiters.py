"""close() of a client while threads or tasks wait for a lock: every waiter ends at once with
ClientClosedError, and fair waiters leave their queue in close's own last cleanup. They left
their places behind (their own leave came once close had woken them, after that cleanup), and
another client's fair waiter queued behind them got the released lock only when the server's
patience dropped them, about 3 s later (found in review)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts, close_only
from _eventually import eventually
from turbolock import ClientClosedError
from turbolock.redis_server import RedisServer

SLACK = 0.5  # a loaded host's scheduling, beside the budget


def _fair_queue(raw: redis.Redis, prefix: str, name: str) -> list[bytes]:
    return raw.zrange(b"{" + (prefix + name).encode() + b"}:queue", 0, -1)


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_close_ends_every_waiter_promptly(make_client: Callable[..., Any], fair: bool) -> None:
    holder = make_client()
    client = make_client()
    assert holder.try_acquire("held", 30) is not None
    results: list[Any] = []

    def wait() -> None:
        started = time.monotonic()
        try:
            outcome: Any = client.lock("held", 30, fair=fair).acquire(timeout=8)
        except BaseException as exc:
            outcome = exc
        results.append((outcome, time.monotonic() - started))

    threads = [threading.Thread(target=wait, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    closed_at = time.monotonic()
    close_only(client)
    for thread in threads:
        thread.join(10)
    ended = time.monotonic() - closed_at
    assert len(results) == 4, results
    assert all(isinstance(outcome, ClientClosedError) for outcome, _ in results), results
    assert ended < 1.0, (ended, results)


@pytest.mark.timing
def test_close_ends_polling_waiters_at_once(make_client: Callable[..., Any]) -> None:
    # Waiters that poll (no waking), their pauses grown to 200 ms: close() ends them as it closes,
    # not as many as 200 ms later, when their next attempt would find the client closed.
    holder = make_client()
    client = make_client(wake_waiters=False)
    assert holder.try_acquire("held", 30) is not None
    ended: list[tuple[object, float]] = []

    def wait() -> None:
        try:
            outcome: Any = client.lock("held", 30).acquire(timeout=8)
        except BaseException as exc:
            outcome = exc
        ended.append((outcome, time.monotonic()))

    threads = [threading.Thread(target=wait, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    close_only(client)
    closed_at = time.monotonic()
    for thread in threads:
        thread.join(10)
    assert len(ended) == 8 and all(isinstance(outcome, ClientClosedError) for outcome, _ in ended), ended
    late = max(at for _, at in ended) - closed_at
    assert late < 0.1, f"a polling waiter ended {late:.3f}s after close() returned"


def test_close_leaves_no_fair_queue_entry(make_client: Callable[..., Any], raw: redis.Redis,
                                          key_prefix: str) -> None:
    holder = make_client()
    client = make_client()
    assert holder.try_acquire("fq", 30) is not None
    results: list[Any] = []

    def wait() -> None:
        try:
            results.append(client.lock("fq", 30, fair=True).acquire(timeout=8))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=wait, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    assert eventually(lambda: len(_fair_queue(raw, key_prefix, "fq")) == 3, 5)
    close_only(client)
    for thread in threads:
        thread.join(10)
    assert len(results) == 3
    time.sleep(0.3)
    left = _fair_queue(raw, key_prefix, "fq")
    assert left == [], f"{len(left)} queue entries left by a closed client's waiters: {results}"


def test_fair_waiters_of_a_closed_client_do_not_hold_up_the_next_one(
        make_client: Callable[..., Any], raw: redis.Redis, key_prefix: str) -> None:
    # What leftover entries would cost: another client's fair waiter, queued behind them, got the
    # released lock only once the server's patience (3 s) dropped them.
    holder = make_client()
    client = make_client()
    other = make_client()
    held = holder.lock("ghost", 30, fair=True)
    assert held.acquire()
    results: list[Any] = []

    def wait(who: Any) -> None:
        started = time.monotonic()
        try:
            results.append((who.lock("ghost", 30, fair=True).acquire(timeout=10), time.monotonic() - started))
        except BaseException as exc:
            results.append((exc, time.monotonic() - started))

    closing = threading.Thread(target=wait, args=(client,), daemon=True)
    closing.start()
    assert eventually(lambda: len(_fair_queue(raw, key_prefix, "ghost")) == 1, 5)
    behind = threading.Thread(target=wait, args=(other,), daemon=True)
    behind.start()
    assert eventually(lambda: len(_fair_queue(raw, key_prefix, "ghost")) == 2, 5)
    close_only(client)
    closing.join(5)
    time.sleep(0.2)
    released = time.monotonic()
    held.release()
    behind.join(10)
    handed = time.monotonic() - released
    assert results and results[-1][0] is True, results
    assert handed < 1.0, f"the next fair waiter got the lock {handed:.2f}s after the release: {results}"


def test_close_right_after_fair_timeouts_leaves_the_queue(make_client: Callable[..., Any],
                                                         raw: redis.Redis, key_prefix: str) -> None:
    holder = make_client()
    client = make_client()
    assert holder.try_acquire("ft", 30) is not None
    threads = [threading.Thread(target=lambda: client.lock("ft", 30, fair=True).acquire(timeout=0.4),
                                daemon=True) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    close_only(client)
    assert _fair_queue(raw, key_prefix, "ft") == []


@pytest.mark.timing
@pytest.mark.parametrize("front", FRONTS)
def test_close_with_fair_waiters_keeps_its_deadline_on_a_stopped_server(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    """close() waits a moment for its woken fair waiters and cleans up once more for them: on a
    server that stopped answering (SIGSTOP) it still ends within its timeout, and they by their
    attempts' own deadlines."""
    fronts = Fronts.at(front, own_server.url, core=core_name, key_prefix=key_prefix, timeout=1.0)
    raw = redis.Redis(port=own_server.port)
    try:
        holder, client = fronts.make(), fronts.make()
        assert holder.try_acquire("stop", 30) is not None
        ended: list[float] = []

        def wait() -> None:
            try:
                client.lock("stop", 30, fair=True).acquire(timeout=8)
            except BaseException:
                pass
            ended.append(time.monotonic())

        threads = [threading.Thread(target=wait, daemon=True) for _ in range(3)]
        for thread in threads:
            thread.start()
        assert eventually(lambda: len(_fair_queue(raw, key_prefix, "stop")) == 3, 5)
        own_server.pause()
        try:
            started = time.monotonic()
            close_only(client)
            took = time.monotonic() - started
            for thread in threads:
                thread.join(5)
        finally:
            own_server.resume()
        assert took < 1.0 + SLACK, f"close took {took:.2f}s against its 1.0s timeout"
        # A waiter stops waiting at once; one whose attempt was on its way ends by that attempt's
        # own deadline (1.0s), which may start near the end of close's.
        assert len(ended) == 3 and max(ended) - started < 2 * 1.0 + SLACK, [t - started for t in ended]
    finally:
        fronts.close()
        raw.close()


@pytest.mark.timing
@pytest.mark.parametrize("front", FRONTS)
def test_close_ends_waiters_before_its_own_slow_releases(own_server: RedisServer, core_name: str,
                                                         key_prefix: str, front: str) -> None:
    """close() first releases what it renewed; on a server that stopped answering that takes its
    whole timeout. Its waiters (woken by releases, fair, polling) end as close() begins, not once
    that release gave up (they waited the 2 s out, then found the client closed)."""
    fronts = Fronts.at(front, own_server.url, core=core_name, key_prefix=key_prefix, timeout=2.0)
    raw = redis.Redis(port=own_server.port)
    try:
        holder = fronts.make()
        assert holder.try_acquire("busy", 30) is not None
        woken, polling = fronts.make(), fronts.make(wake_waiters=False)
        ended: list[tuple[str, object, float]] = []

        def wait(who: Any, kind: str) -> None:
            try:
                outcome: Any = who.lock("busy", 30, fair=kind == "fair").acquire(timeout=15)
            except BaseException as exc:
                outcome = exc
            ended.append((kind, outcome, time.monotonic()))

        threads = [threading.Thread(target=wait, args=(who, kind), daemon=True)
                   for who, kind in ((woken, "woken"), (woken, "fair"), (polling, "polling"))]
        renewed = [client.try_acquire(f"renewed:{i}", 30, auto_renew=True)
                   for i, client in enumerate((woken, polling))]
        assert None not in renewed
        for thread in threads:
            thread.start()
        assert eventually(lambda: len(_fair_queue(raw, key_prefix, "busy")) == 1, 5)
        time.sleep(1.0)  # the polling waiter's pauses grown long
        own_server.pause()
        try:
            started = time.monotonic()
            closers = [threading.Thread(target=close_only, args=(client,), daemon=True)
                       for client in (woken, polling)]
            for closer in closers:
                closer.start()
            for thread in threads:
                thread.join(10)
            for closer in closers:
                closer.join(10)
            closed = time.monotonic() - started
        finally:
            own_server.resume()
        assert closed > 1.5, f"close() took {closed:.2f}s: its release did not wait on the stopped server"
        assert sorted(kind for kind, _, _ in ended) == ["fair", "polling", "woken"], ended
        assert all(isinstance(outcome, ClientClosedError) for _, outcome, _ in ended), ended
        late = {kind: round(at - started, 3) for kind, _, at in ended}
        # At once; a waiter whose attempt was on its way as the server stopped (a polling one, now
        # and then, on a loaded host) by that attempt's deadline. The old order: all after 2 s.
        assert sorted(late.values())[1] < 0.5, f"waiters ended after close() began: {late}"
    finally:
        fronts.close()
        raw.close()
