"""A lease never believes longer than its key lives: extends racing each other and the renewer.

An ``extend()`` to a longer ttl while a renewal, or another extend, with a shorter ttl is in
flight may run on the server before or after it. The lease must believe the earliest expiry
either could have left, so ``ensure_held()`` can never pass while the key has already expired.
Each run has two threads (or tasks) extend auto-renewed leases to 10 s and to 1 s at the same
time, then compares every lease's belief with its key's PTTL on the server. The negative
control puts back the old success handler (the last reply wins) and shows the check catches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import redis

import turbolock._flows.bulk_flows as bulk_flows
import turbolock._flows.bulk_plan as bulk_plan
from turbolock import Lease, LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # renewals must land within ttls of a second or two

TTL = 1.0  # renewed a third of the ttl before expiry: every ~0.67 s, all leases together
LONG = 10.0
LEASES = 2000
STORM = 2.0
ROUNDS = 30


def _violations(raw: redis.Redis, prefix: bytes, leases: Sequence[Lease]) -> list[str]:
    """Leases whose belief runs past their key's expiry on the server (PTTL read after the belief;
    commands still in flight can only lengthen a key the lease already counted)."""
    beliefs = [lease.expires_at for lease in leases]
    pipe = raw.pipeline(transaction=False)
    for lease in leases:
        pipe.pttl(prefix + lease.key)
    pttls = pipe.execute()
    answered = time.monotonic()
    bad = []
    for lease, belief, pttl in zip(leases, beliefs, pttls, strict=True):
        if lease.is_lost:
            continue
        key_expiry = answered + (pttl + 1) / 1000.0  # PTTL truncates to the millisecond
        if pttl < 0 or belief > key_expiry:
            bad.append(f"{lease.name!r} believes {belief - answered:+.3f}s, key has {pttl} ms")
    return bad


class SlowRepliesProxy:
    """A loopback proxy in front of a server whose first connection gets its replies DELAY late,
    so a command can run on the server before another one and still answer after it."""

    DELAY = 0.03

    def __init__(self, port: int) -> None:
        self._target = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._accepted = 0
        self._sockets: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._target))
            self._sockets += [client, server]
            delay = self.DELAY if self._accepted == 0 else 0.0
            self._accepted += 1
            threading.Thread(target=self._pipe, args=(client, server, 0.0), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, delay), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, delay: float) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if delay:
                    time.sleep(delay)
                target.sendall(data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for sock in self._sockets:
            sock.close()


def _race(*calls: Callable[[], object], stagger: float = 0.0) -> None:
    """Run the calls at the same moment, each on a thread of its own (the n-th ``n * stagger``
    seconds later: so the first one runs on the server first, whichever connection answers last)."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(index: int, call: Callable[[], object]) -> None:
        barrier.wait()
        time.sleep(index * stagger)
        try:
            call()
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=pair) for pair in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _storm_sync(client: LockClient, leases: list[Lease], bulk: bool, check: Callable[[], None]) -> None:
    """Rounds of two extends of the same leases at once, one to LONG and one to TTL, each round
    checked once both answered (the renewer runs all along)."""
    for _ in range(ROUNDS if bulk else 5):
        if bulk:
            _race(lambda: client.extend_many(leases, LONG), lambda: client.extend_many(leases, TTL),
                  stagger=0.002)
        else:
            _race(lambda: [client.extend(lease, LONG) for lease in leases],
                  lambda: [client.extend(lease, TTL) for lease in leases], stagger=0.002)
        check()


@contextlib.contextmanager
def _old_success_handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The handler before the fix: the last reply wins, with its own send time and ttl."""

    def last_reply_wins(leases: Sequence[Lease], sent_at: float, ttl_ms: int) -> None:
        for lease in leases:
            lease._flight = None
            lease.acquired_at = sent_at
            lease.ttl_ms = ttl_ms
            lease._expires = sent_at + ttl_ms / 1000.0

    with monkeypatch.context() as patch:
        patch.setattr(bulk_plan, "commands_ran", last_reply_wins)
        patch.setattr(bulk_flows, "commands_ran", last_reply_wins)  # extend_many's calls settled early
        yield


def _run_sync(server: RedisServer, core_name: str, key_prefix: str, bulk: bool) -> list[str]:
    raw = redis.Redis(port=server.port)
    proxy = SlowRepliesProxy(server.port)
    try:
        with LockClient(port=proxy.port, core=core_name, key_prefix=key_prefix) as client:
            count = 500 if bulk else 20
            result = client.acquire_many([f"race:{i}" for i in range(count)], TTL, auto_renew=True)
            leases = result.acquired
            assert len(leases) == count
            _race(lambda: client.query("a"), lambda: client.query("b"))  # a slow and a fast connection
            bad: list[str] = []
            _storm_sync(client, leases, bulk, lambda: bad.extend(_violations(raw, client.key_prefix, leases)))
            return bad
    finally:
        proxy.close()
        raw.close()


@pytest.mark.parametrize("bulk", [True, False], ids=["extend_many", "extend"])
def test_extend_racing_renewal_never_believes_past_the_key(own_server: RedisServer, core_name: str,
                                                          key_prefix: str, bulk: bool) -> None:
    bad = _run_sync(own_server, core_name, key_prefix, bulk)
    assert bad == [], f"{len(bad)} leases believe past their key: {bad[:5]}"


def test_the_check_catches_last_reply_wins(own_server: RedisServer, core_name: str, key_prefix: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with _old_success_handler(monkeypatch):
        bad = _run_sync(own_server, core_name, f"{key_prefix}control:", bulk=True)
    assert bad, "the negative control found nothing: the race check cannot catch the fault"


def test_asyncio_extend_racing_renewal_never_believes_past_the_key(own_server: RedisServer, core_name: str,
                                                                  key_prefix: str) -> None:
    raw = redis.Redis(port=own_server.port)

    async def body() -> list[str]:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix,
                                            max_connections=2) as client:
            result = await client.acquire_many([f"arace:{i}" for i in range(LEASES)], TTL, auto_renew=True)
            leases = result.acquired
            await asyncio.sleep(TTL * 0.5)
            end = time.monotonic() + STORM

            async def extend_to(ttl: float) -> None:
                while time.monotonic() < end:
                    await asyncio.gather(client.extend_many(leases[:1000], ttl),
                                         *(client.extend(lease, ttl) for lease in leases[1000:1100]))

            await asyncio.gather(extend_to(LONG), extend_to(TTL))
            await asyncio.sleep(0.05)
            return _violations(raw, client.key_prefix, leases)

    try:
        bad = asyncio.run(body())
    finally:
        raw.close()
    assert bad == [], f"{len(bad)} leases believe past their key: {bad[:5]}"


def _redlock_violations(raws: Sequence[redis.Redis], prefix: bytes, leases: Sequence[Any],
                        quorum: int) -> list[str]:
    """Redlock leases whose validity runs past the time a quorum of masters still has the key."""
    beliefs = [lease.expires_at for lease in leases]
    rows = []
    for raw in raws:
        pipe = raw.pipeline(transaction=False)
        for lease in leases:
            pipe.pttl(prefix + lease.key)
        rows.append(pipe.execute())
    answered = time.monotonic()
    bad = []
    for j, (lease, belief) in enumerate(zip(leases, beliefs, strict=True)):
        if lease.is_lost:
            continue
        standing = sorted(((row[j] + 1) / 1000.0 for row in rows if row[j] >= 0), reverse=True)
        if len(standing) < quorum or belief > answered + standing[quorum - 1]:
            have = [row[j] for row in rows]
            bad.append(f"{lease.name!r} believes {belief - answered:+.3f}s, masters have {have} ms")
    return bad


def test_redlock_extend_racing_renewal_keeps_validity_within_the_quorum(core_name: str,
                                                                        key_prefix: str) -> None:
    from turbolock import RedlockClient

    with RedisServer() as a, RedisServer() as b, RedisServer() as c:
        raws = [redis.Redis(port=server.port) for server in (a, b, c)]
        try:
            with RedlockClient([a.url, b.url, c.url], core=core_name, key_prefix=key_prefix) as client:
                result = client.acquire_many([f"rrace:{i}" for i in range(500)], TTL, auto_renew=True)
                leases = result.acquired
                assert len(leases) == 500
                time.sleep(TTL * 0.5)
                end = time.monotonic() + STORM

                def extend_to(ttl: float) -> None:
                    while time.monotonic() < end:
                        client.extend_many(leases, ttl)

                threads = [threading.Thread(target=extend_to, args=(ttl,)) for ttl in (LONG, TTL)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                time.sleep(0.05)
                bad = _redlock_violations(raws, client.key_prefix, leases, client.quorum)
        finally:
            for raw in raws:
                raw.close()
    assert bad == [], f"{len(bad)} Redlock leases believe past their quorum: {bad[:5]}"


def test_two_overlapping_extends_believe_the_earlier_expiry(own_server: RedisServer, core_name: str,
                                                           key_prefix: str) -> None:
    # The lease's bookkeeping on its own, with two extends in flight that answer out of order.
    from turbolock.lease import commands_ran, commands_sent

    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as client:
        lease = client.try_acquire("two", 5)
        assert lease is not None
        now = time.monotonic()
        first, second = now, now + 0.001
        commands_sent((lease,), first, first + 30)    # extend to 30 s, sent first
        commands_sent((lease,), second, second + 2)   # extend to 2 s, sent second
        assert lease.expires_at == pytest.approx(second + 2), "a shortening command counts while in flight"
        commands_ran((lease,), second, 2000)  # the 2 s one answers first
        commands_ran((lease,), first, 30000)  # the 30 s one answers last, but may have run first
        assert lease.expires_at == pytest.approx(second + 2)
        # Once nothing else is in flight, a command that answers alone is believed as it is.
        third = time.monotonic()
        commands_sent((lease,), third, third + 30)
        commands_ran((lease,), third, 30000)
        assert lease.expires_at == pytest.approx(third + 30)
        assert lease._flight is None, "no command in flight, none kept from the past"
        assert client.release(lease)


def test_commands_answered_before_a_later_one_was_sent_do_not_hold_it_back(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    # Two overlapping commands keep each other in view; one that answered before a third was sent
    # cannot have run after it, so a steady stream of overlapping renewals never drags the
    # belief back to the first one's expiry.
    from turbolock.lease import commands_ran, commands_sent

    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as client:
        lease = client.try_acquire("stream", 5)
        assert lease is not None
        start = time.monotonic()
        previous = start
        commands_sent((lease,), previous, previous + 1)
        for step in range(1, 50):
            sent = start + step * 0.01
            commands_sent((lease,), sent, sent + 1)  # sent while the previous one is in flight
            commands_ran((lease,), previous, 1000)   # then the previous one answers
            previous = sent
        commands_ran((lease,), previous, 1000)
        assert lease.expires_at >= start + 0.48 + 1, "old answers must not hold the belief back"
        assert lease._flight is None
        assert client.release(lease)


def test_a_round_that_broke_leaves_the_earliest_expiry_it_sent(own_server: RedisServer, core_name: str,
                                                              key_prefix: str) -> None:
    # A renewal round that failed without saying which of its commands went out: any may have
    # run, so the belief drops to the earliest, and nothing stays "in flight" for ever.
    from turbolock.lease import commands_abandoned, commands_sent

    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as client:
        lease = client.try_acquire("broken", 30)
        assert lease is not None
        now = time.monotonic()
        commands_sent((lease,), now, now + 2)
        commands_sent((lease,), now + 0.001, now + 40)
        commands_abandoned((lease,))
        assert lease.expires_at == pytest.approx(now + 2)
        assert lease._flight is None, "no command in flight, none kept from the past"
        assert client.release(lease)


def test_a_command_whose_reply_was_lost_caps_every_later_success(own_server: RedisServer, core_name: str,
                                                                key_prefix: str) -> None:
    # A renewal that timed out may still run later (its bytes waiting in a stopped server's
    # buffer), after an extend that succeeded since: the extend's belief cannot exceed its own
    # send time plus the lost renewal's ttl.
    from turbolock.lease import commands_ran, commands_sent, commands_unknown

    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as client:
        lease = client.try_acquire("ghost", 30)
        assert lease is not None
        first = time.monotonic()
        commands_sent((lease,), first, first + 10)
        commands_unknown((lease,), first)
        later = first + 0.5
        commands_sent((lease,), later, later + 60)
        commands_ran((lease,), later, 60_000)
        assert lease.expires_at == pytest.approx(later + 10)
        assert client.release(lease)


def test_two_maybe_held_tokens_on_one_key_are_both_released() -> None:
    from turbolock._flows.cleanup_book import CleanupBook

    book = CleanupBook()
    forget_at = time.monotonic() + 60
    book.remember(b"k", b"t1" * 8, forget_at)
    book.remember(b"k", b"t2" * 8, forget_at)
    assert len(book) == 2
    entries = book.take()
    assert sorted(token for _, token, _ in entries) == [b"t1" * 8, b"t2" * 8]
    book.settle(entries, [0, None])  # t1 answered, t2 did not
    assert len(book) == 1 and book.take()[0][1] == b"t2" * 8
