"""The renewal book's view of a round, read once per lease: the earliest expiry a wake-up found
among the due leases bounds the round's deadline (read again when some lease's expiry may have
gone down since: an extend to a shorter ttl from another thread), and a renewed lease's next due
time comes from the belief its renewal left, an extend in flight with a shorter ttl included."""

from __future__ import annotations

import threading
import time

import pytest

from turbolock import AutoRenew, LockClient
from turbolock._flows.renewal_book import SETTLE_MARGIN
from turbolock._flows.renewal_round import due_round_flow, take_due
from turbolock._sync.drive import run
from turbolock.lease import commands_sent
from turbolock.redis_server import RedisServer


def test_a_round_ends_before_the_earliest_expiry_a_wake_up_found(own_server: RedisServer, core_name: str,
                                                                 key_prefix: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as client:
        leases = client.acquire_many([f"due:{i}" for i in range(5)], 30,
                                     auto_renew=AutoRenew(renew_before=29.0)).acquired
        book = client._renewer().book
        client._renewer().stop()  # the thread no longer takes them: this test does
        now = time.monotonic()
        commands_sent((leases[3],), now, now + 4.0)  # an extend to a shorter ttl, in flight
        to_send, lost = book.take_due(now + 2.0)
        assert lost == []
        assert sorted(map(id, to_send)) == sorted(map(id, leases))
        assert to_send.earliest == pytest.approx(now + 4.0)
        assert book.round_deadline(to_send, now + 2.0, 10.0) == pytest.approx(now + 4.0 - SETTLE_MARGIN)
        # a list of the same leases (Redlock's groups) is looked over again: the same answer
        assert book.round_deadline(list(to_send), now + 2.0, 10.0) == book.round_deadline(to_send, now + 2.0,
                                                                                          10.0)


def test_a_renewed_lease_is_due_again_by_its_belief(own_server: RedisServer, core_name: str,
                                                    key_prefix: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as client:
        lease, other = client.acquire_many(["belief:0", "belief:1"], 30,
                                           auto_renew=AutoRenew(renew_before=10.0)).acquired
        renewer = client._renewer()
        book = renewer.book
        renewer.stop()
        sent_at = time.monotonic()
        book.sending([lease, other], 30_000, sent_at)
        commands_sent((other,), sent_at + 0.001, sent_at + 12.0)  # a shorter extend, still in flight
        book.renewed([lease, other], sent_at, 30_000)
        assert lease.expires_at == pytest.approx(sent_at + 30.0)
        assert other.expires_at == pytest.approx(sent_at + 12.0)
        assert lease.renewal is not None and other.renewal is not None
        assert (lease.renewal.renewals, other.renewal.renewals) == (1, 1)
        due = set(book._wheel.advance(sent_at + 2.5))
        assert other.renewal.id in due and lease.renewal.id not in due  # 12 - 10 s: due at 2 s
        assert lease.renewal.id in book._wheel.advance(sent_at + 20.5)  # 30 - 10 s


def test_a_shorter_extend_between_the_wake_up_and_the_round_bounds_the_round(own_server: RedisServer,
                                                                             core_name: str,
                                                                             key_prefix: str) -> None:
    # Another thread shortens a due lock after the renewer's wake-up read its expiry (a GIL switch,
    # or an on_lost callback run there): the round still ends by the new expiry, so a loss is
    # signalled no later than the lease's own expiry. (Found in review: the wake-up's earliest
    # expiry was once used as it was.)
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=3.0) as client:
        lease = client.try_acquire("job", 30, auto_renew=AutoRenew(renew_before=29.9))
        assert lease is not None
        renewer = client._renewer()
        renewer.stop()  # this test is the renewer thread, step by step
        time.sleep(0.2)  # due 0.1 s after the acquire
        to_send = take_due(renewer)
        assert to_send == [lease]
        other = threading.Thread(target=lambda: client.extend(lease, 0.5))
        other.start()
        other.join()
        expiry = lease.expires_at
        assert expiry < time.monotonic() + 0.5
        own_server.pause()  # the renewal gets no reply: the round lasts until its deadline
        try:
            run(due_round_flow(renewer, to_send))
            ended = time.monotonic()
        finally:
            own_server.resume()
        assert lease.is_lost
        # (0.2 s of slack for a loaded machine: the round's deadline is the expiry less 25 ms)
        assert ended <= expiry + 0.2, f"the round ended {ended - expiry:.2f}s after the lease's expiry"
