"""Two holders whose clients list the same three masters in different orders: FencedStore
must compare each master's fences with that master's own. (Its fields were once named by the
master's place in the client's list, 'fence:<i>', so the stale holder's fences were compared
with other masters' and its write accepted after its successor wrote: found by a reviewer.)"""

from __future__ import annotations

import time

import redis

from turbolock import FencedStore, RedlockClient
from turbolock._wire.scripts import fence_counter
from turbolock.redis_server import RedisServer


def test_a_stale_holder_is_refused_whatever_the_master_order(three: list[RedisServer], key_prefix: str,
                                                             core_name: str) -> None:
    a, b, c = three
    raw = {s: redis.Redis(host=s.host, port=s.port) for s in three}
    store = FencedStore(raw[a])
    skey = key_prefix + "balance"
    lock_key = key_prefix + "acct"
    counter = fence_counter(key_prefix.encode())
    first = RedlockClient([a.url, b.url, c.url], key_prefix=key_prefix, core=core_name)
    second = RedlockClient([c.url, a.url, b.url], key_prefix=key_prefix, core=core_name)  # same masters
    try:
        started = 10**15  # a counter value the clock start is above (``NEXT_FENCES``), kept as it is
        raw[a].set(counter, started + 10)
        raw[b].set(counter, started + 50)
        raw[c].set(counter, started + 1)
        raw[c].set(lock_key, "someone-else", px=400)  # c does not grant the first holder
        stale = first.try_acquire("acct", 0.5, fenced=True)
        assert stale is not None and stale.fences == (started + 11, started + 51, None)
        time.sleep(0.6)  # the holder pauses past its ttl (and c's key expires)
        fresh = second.try_acquire("acct", 10, fenced=True)
        assert fresh is not None and fresh.fences == (started + 2, started + 12, started + 52)  # c, a, b
        assert store.write(skey, "successor", fresh.fences)
        # The stale holder wakes up and writes: master a's fence went 11 -> 12 and b's 51 -> 52,
        # so it must be refused.
        assert not store.write(skey, "stale", stale.fences), (
            f"stale fences {stale.fences} accepted after successor {fresh.fences} wrote; store hash "
            f"{raw[a].hgetall(skey)}")
    finally:
        first.close()
        second.close()
        for r in raw.values():
            r.close()
