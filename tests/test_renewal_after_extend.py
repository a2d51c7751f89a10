"""An auto-renewed lease extended by hand to another ttl is renewed by the margin of its new
ttl: a third of it by default (README: "renewed ``renew_before`` seconds before it would expire
(default: a third of the ttl)"), a margin given in seconds while it is shorter than the ttl.
Keeping the acquire's margin (10 s for 30 s) for a lease extended to 3 s made it due again as
soon as it was renewed: one script call per lease at every wake-up of the renewer, for as long
as it was held."""

from __future__ import annotations

import time

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from turbolock import AutoRenew
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # renewals counted in windows of a second or two


def _script_calls(raw: redis.Redis) -> int:
    stats = raw.info("commandstats")
    return sum(stats.get(name, {}).get("calls", 0) for name in ("cmdstat_evalsha", "cmdstat_eval"))


def _fronts(front: str, server: RedisServer, core_name: str, key_prefix: str) -> Fronts:
    return Fronts.at(front, server.url, core=core_name, key_prefix=key_prefix)


@pytest.mark.parametrize("front", FRONTS)
def test_extend_many_to_a_shorter_ttl_renews_a_third_of_the_new_ttl_before_expiry(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    fronts = _fronts(front, own_server, core_name, key_prefix)
    raw = redis.Redis(port=own_server.port)
    try:
        client = fronts.make()
        leases = client.acquire_many(["a", "b", "c"], 30, auto_renew=True).acquired
        assert client.extend_many(leases, 3) == [True, True, True]
        extended = time.monotonic()
        before = _script_calls(raw)
        time.sleep(1.5)  # renewed 1 s before expiry: nothing due yet
        calls = _script_calls(raw) - before
        assert calls <= 1, (f"{calls} renewal scripts in 1.5 s for 3 locks extended to 3 s: renewed at "
                            f"every wake-up (the acquire's margin, 10 s, kept)")
        time.sleep(max(0.0, extended + 2.7 - time.monotonic()))
        assert _script_calls(raw) - before >= 1, "the extended locks were not renewed"
        assert not any(lease.is_lost for lease in leases)
        assert all(0 < (raw.pttl(key_prefix + name) or 0) <= 3000 for name in "abc")
    finally:
        fronts.close()
        raw.close()


@pytest.mark.parametrize("front", FRONTS)
def test_a_default_lock_extended_shorter_is_not_renewed_in_a_loop(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    """The README's Lock: ``client.lock("report")`` (30 s, renewed), then ``lock.extend(5)``."""
    fronts = _fronts(front, own_server, core_name, key_prefix)
    raw = redis.Redis(port=own_server.port)
    try:
        client = fronts.make()
        lock = client.lock("report")
        assert lock.acquire()
        assert lock.extend(5)
        before = _script_calls(raw)
        time.sleep(1.5)
        calls = _script_calls(raw) - before
        assert calls <= 1, f"{calls} renewal scripts in 1.5 s for one lock extended to 5 s"
        lock.release()
    finally:
        fronts.close()
        raw.close()


@pytest.mark.parametrize("front", FRONTS)
def test_a_margin_given_in_seconds_is_kept_while_it_fits_the_new_ttl(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    """``renew_before=0.5`` on a 30 s lock extended to 3 s: still 0.5 s (renewed 2.5 s after
    the extend, where a third of the new ttl would be 2 s after it)."""
    fronts = _fronts(front, own_server, core_name, key_prefix)
    raw = redis.Redis(port=own_server.port)
    try:
        client = fronts.make()
        lease = client.try_acquire("given", 30, auto_renew=AutoRenew(renew_before=0.5))
        assert lease is not None
        assert client.extend(lease, 3)
        extended = time.monotonic()
        key = key_prefix + "given"
        time.sleep(max(0.0, extended + 2.25 - time.monotonic()))
        assert (raw.pttl(key) or 0) < 1000, "renewed before its own margin (0.5 s before expiry)"
        time.sleep(max(0.0, extended + 2.9 - time.monotonic()))
        assert (raw.pttl(key) or 0) > 2000, "not renewed 0.5 s before expiry"
        assert not lease.is_lost
    finally:
        fronts.close()
        raw.close()
