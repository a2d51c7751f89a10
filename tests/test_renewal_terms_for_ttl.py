"""``RenewalTerms.for_ttl``: a renewed lease extended by hand to another ttl renews by the margin
of that ttl, worked out from the margin its acquire asked for (found by review):

* ``AutoRenew(renew_before=3)`` extended to a ttl shorter than 3 s and then back: the margin asked
  for comes back (it was lost for good, the short ttl's stand-in kept);
* extended back and forth between two ttls, a lease does not grow a new terms object at every
  extend (a chain of them kept alive from the first terms).
"""

from __future__ import annotations

import time

import redis

from turbolock import AutoRenew, LockClient
from turbolock._flows.renewal_book import RenewalTerms
from turbolock.redis_server import RedisServer


def test_a_margin_given_in_seconds_comes_back_with_the_ttl(own_server: RedisServer, core_name: str,
                                                          key_prefix: str) -> None:
    raw = redis.Redis(port=own_server.port)
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix)
    try:
        lease = client.try_acquire("m", 6, auto_renew=AutoRenew(renew_before=3))
        assert lease is not None
        assert client.extend(lease, 2)  # shorter than the 3 s margin: a third of 2 s meanwhile
        assert client.extend(lease, 6)  # the first ttl again: the 3 s margin again
        extended = time.monotonic()
        assert lease.renewal is not None
        margin = lease.renewal.renew_before
        time.sleep(max(0.0, extended + 4.0 - time.monotonic()))
        left = raw.pttl(key_prefix + "m")
        assert margin == 3 and left > 3500, (
            f"extended back to 6 s, the lease renews {margin:.3f}s before expiry (asked: 3 s); 4 s "
            f"after the extend its key has {left} ms left (renewed at 3 s it would have about 5000)")
    finally:
        client.close()
        raw.close()


def _reachable(terms: RenewalTerms) -> int:
    seen = {id(terms)}
    todo = [terms]
    while todo:
        by_ttl = todo.pop()._by_ttl or {}
        for child in by_ttl.values():
            if id(child) not in seen:
                seen.add(id(child))
                todo.append(child)
    return len(seen)


def test_extending_back_and_forth_does_not_grow_the_terms(redis_server: RedisServer, core_name: str,
                                                          key_prefix: str) -> None:
    client = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    try:
        a, b = client.acquire_many(["a", "b"], 30, auto_renew=True).acquired
        assert b.renewal is not None
        root = b.renewal.terms
        for _ in range(200):
            assert client.extend(a, 10)
            assert client.extend(a, 30)
        count = _reachable(root)
        assert a.renewal is not None
        assert count <= 3, (f"{count} RenewalTerms kept for two leases and two ttls after 400 extends; "
                            f"the lease's terms now: {a.renewal.renew_before}s margin")
    finally:
        client.close()
