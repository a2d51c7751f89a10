"""A fenced acquire by an ACL user without ``+time`` (which the README says it needs) is refused,
but its script's ``INCRBY`` already ran (scripts are not rolled back) and left the shared counter
at 1: every later fenced acquire of that user (or of anyone on that prefix) is then granted,
silently, with fences 2, 3, ... instead of being refused or starting at the server's clock in
microseconds (README "Fencing tokens": "A counter that does not exist ... starts at the server's
clock in microseconds: fences are numbers near 1.8 x 10^15"; the shared counter starting "far
above" older per-name counters is what makes moving from them safe). Found in review."""

from __future__ import annotations

import time

import redis

from turbolock import LockClient, ResponseError
from turbolock._wire.scripts import fence_counter
from turbolock.redis_server import RedisServer


def test_a_refused_fenced_acquire_leaves_no_counter_below_the_clock(redis_server: RedisServer,
                                                                     core_name: str, key_prefix: str) -> None:
    raw = redis.Redis(host=redis_server.host, port=redis_server.port)
    user = f"notime-{key_prefix.strip(':')}"
    keys = (f"~{key_prefix}*", "~{" + f"{key_prefix}*")
    raw.execute_command("ACL", "SETUSER", user, "reset", "on", ">pw", *keys, "+@all", "-time")
    url = f"redis://{user}:pw@{redis_server.host}:{redis_server.port}"
    try:
        with LockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
            try:
                client.try_acquire("first", 10, fenced=True)
            except ResponseError:
                pass  # refused: the user may not run TIME
            clock_us = int(time.time() * 1_000_000)
            try:
                lease = client.try_acquire("second", 10, fenced=True)
            except ResponseError:
                lease = None  # refused again: fine
            counter = raw.get(fence_counter(key_prefix.encode()))
            assert lease is None or lease.fence > clock_us, (
                f"granted fence {lease.fence} from a counter the refused acquire left at "
                f"{counter!r}, not started at the clock (~{clock_us})")
            if lease is not None:
                client.release(lease)
    finally:
        raw.execute_command("ACL", "DELUSER", user)
        raw.close()


def _grants(client: LockClient, name: str, tries: int) -> list[int]:
    """The fences of up to ``tries`` fenced acquires of ``name`` (each released), the refused left out."""
    fences = []
    for _ in range(tries):
        try:
            lease = client.try_acquire(name, 10, fenced=True)
        except ResponseError:
            continue
        assert lease is not None
        fences.append(lease.fence)
        assert client.release(lease)
    return fences


def test_a_lost_counter_never_hands_out_a_fence_again(redis_server: RedisServer, core_name: str,
                                                      key_prefix: str) -> None:
    # A common restrictive ACL: +@read +@write +@scripting has no TIME (TIME is only in @fast).
    raw = redis.Redis(host=redis_server.host, port=redis_server.port)
    user = f"rws-{key_prefix.strip(':')}"
    keys = (f"~{key_prefix}*", "~{" + f"{key_prefix}*")
    raw.execute_command("ACL", "SETUSER", user, "reset", "on", ">pw", *keys,
                        "+@read", "+@write", "+@scripting")
    url = f"redis://{user}:pw@{redis_server.host}:{redis_server.port}"
    try:
        with LockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
            before = _grants(client, "account", 4)
            # The counter is lost (README: "A counter that does not exist (new, deleted, evicted,
            # lost by a restart without persistence) starts at the server's clock").
            raw.delete(fence_counter(key_prefix.encode()))
            after = _grants(client, "account", 4)
            repeated = [fence for fence in after if before and fence <= max(before)]
            assert not repeated, (
                f"fences {before} before the counter was lost, {after} after: later grants got "
                f"fences already handed out")
    finally:
        raw.execute_command("ACL", "DELUSER", user)
        raw.close()


def test_a_counter_left_low_goes_on_from_the_clock(redis_server: RedisServer, core_name: str,
                                                   key_prefix: str) -> None:
    """A counter the bug left low (or an earlier build's, started at 1) is moved up to the clock
    by the next grant, above every fence it gave: the repair needs nobody to delete it."""
    raw = redis.Redis(host=redis_server.host, port=redis_server.port)
    counter = fence_counter(key_prefix.encode())
    try:
        raw.set(counter, 41)
        with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
            clock_us = int(time.time() * 1_000_000)
            fences = _grants(client, "account", 2)
        assert fences[0] > clock_us and fences[1] == fences[0] + 1, fences
    finally:
        raw.close()
