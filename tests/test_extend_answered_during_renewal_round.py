"""README "Use"/"Auto-renewal": extend(ttl) makes the lock live ttl from now, and "a renewed lock
extended by hand to another ttl is renewed by the margin of its new ttl". When a renewal round
was already in flight as the extend went out, and the extend's reply is settled before the
renewal's, the renewal's settlement overwrites the lease's ttl with the old one: the extend
returned True, yet lease.ttl goes back to the old ttl and every later renewal shortens the key
from 10 s back to 1.2 s.

The renewal's reply is held back deterministically: two leases due in the same round, in two
batches (two ttls); the first batch's lease is found lost, and its on_lost (which runs on the
renewer thread, between the two batches' settlements) lets another thread extend the second
lease and waits for that extend to return."""

from __future__ import annotations

import threading
import time

import redis

from turbolock import AutoRenew, LockClient
from turbolock.redis_server import RedisServer


def test_an_extend_answered_during_a_renewal_round_keeps_its_ttl(
        own_server: RedisServer, core_name: str) -> None:
    raw = redis.Redis(port=own_server.port)
    with LockClient.from_url(own_server.url, core=core_name, key_prefix="") as client:
        box: dict[str, object] = {}
        extended = threading.Event()

        def extender() -> None:
            box["extended"] = client.extend(box["target"], 10)  # type: ignore[arg-type]
            extended.set()

        def on_lost(lease: object) -> None:
            threading.Thread(target=extender).start()
            extended.wait(2)

        # A lease whose loss holds the renewer up 0.3 s from 0.45 s on, so that the next two, due
        # 0.6 s after the acquire, are surely taken in one round, as two batches (ttls 0.9 s, 1.2 s).
        staller = client.try_acquire("staller", 0.9, auto_renew=AutoRenew(renew_before=0.45),
                                     on_lost=lambda lease: time.sleep(0.3))
        decoy = client.try_acquire("decoy", 0.9, auto_renew=AutoRenew(renew_before=0.3), on_lost=on_lost)
        target = client.try_acquire("target", 1.2, auto_renew=AutoRenew(renew_before=0.6))
        assert staller is not None and decoy is not None and target is not None
        box["target"] = target
        raw.delete("staller")
        raw.delete("decoy")  # the decoy's renewal finds it gone: on_lost runs mid-round
        assert extended.wait(3)
        assert box["extended"] is True and decoy.is_lost
        time.sleep(1.5)  # a few more renewals of the target
        assert not target.is_lost
        assert target.ttl == 10, f"the lease went back to ttl {target.ttl} after extend(10) returned True"
        assert raw.pttl("target") > 5000, (
            f"the renewer shortened the extended lock to {raw.pttl('target')} ms")
        assert client.release(target) is True
