"""Untested before review: a Redlock bulk release counted as done with a quorum minus one
(``release_many_flow``: ``done >= quorum - 1``). The bulk tests only release stolen leases after
an extend already found them lost; a release_many of a lock another client holds on a majority
must answer False (only the one master still ours deleted its key)."""

from __future__ import annotations

from collections.abc import Callable

from redlock._helpers import TTL, values
from turbolock import RedlockClient
from turbolock.redis_server import RedisServer


def test_release_many_of_a_lock_taken_over_on_a_majority_is_false(
        three: list[RedisServer], make_redlock: Callable[..., RedlockClient], raws: Callable[..., list],
        key_prefix: str) -> None:
    client = make_redlock(three)
    leases = client.acquire_many(["kept", "stolen"], TTL).acquired
    assert len(leases) == 2
    connections = raws(three)
    for raw in connections[:2]:
        raw.set(key_prefix + "stolen", b"thief", px=60_000)
    assert client.release_many(leases) == [True, False]
    assert values(connections, key_prefix + "stolen") == [b"thief", b"thief", None]
    assert values(connections, key_prefix + "kept") == [None] * 3
