"""What a lease says once its release answered: released, it has no time left (``valid_for()``
0, ``ensure_held()`` raises "released", as its Redlock ``status`` already said UNLOCKED); found
not ours, it is lost, as an extend answering False already made it. Before, both kept their old
validity and passed ``ensure_held()`` while another client could hold the lock. Single and bulk
releases, one server and Redlock, both cores (the bulk path writes the leases in one pass of
the core)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from turbolock import LockClient, LockLostError, RedlockClient
from turbolock.redis_server import RedisServer

Release = Callable[[LockClient, list], list[bool]]
RELEASES: dict[str, Release] = {
    "release": lambda client, leases: [client.release(lease) for lease in leases],
    "release_many": lambda client, leases: client.release_many(leases),
}


@pytest.mark.parametrize("release", RELEASES.values(), ids=RELEASES.keys())
def test_a_released_lease_has_no_time_left(client: LockClient, release: Release) -> None:
    leases = client.acquire_many(["a", "b", "c"], 10).acquired
    assert all(lease.valid_for() > 9 for lease in leases)
    assert release(client, leases) == [True] * 3
    other = client.try_acquire("a", 10)
    assert other is not None  # anyone may hold it now
    for lease in leases:
        assert lease.valid_for() == 0.0 and not lease.is_lost
        with pytest.raises(LockLostError, match="was released"):
            lease.ensure_held()
    assert other.valid_for() > 9


@pytest.mark.parametrize("release", RELEASES.values(), ids=RELEASES.keys())
def test_a_release_that_finds_the_lock_not_ours_loses_the_lease(client: LockClient, raw: redis.Redis,
                                                                release: Release) -> None:
    leases = client.acquire_many(["x", "y"], 10).acquired
    raw.set(client.key_prefix + b"x", b"someone-else-token", px=10000)  # taken over
    assert release(client, leases) == [False, True]
    assert leases[0].is_lost and "release found" in (leases[0].lost_reason or "")
    assert leases[0].valid_for() == 0.0 and leases[1].valid_for() == 0.0
    with pytest.raises(LockLostError, match="was lost"):
        leases[0].ensure_held()
    assert release(client, leases[1:]) == [False]  # released twice: still released, not lost
    assert not leases[1].is_lost


def test_a_released_redlock_lease_has_no_time_left(session_masters: list[RedisServer], core_name: str,
                                                   key_prefix: str) -> None:
    with RedlockClient([server.url for server in session_masters[:3]], core=core_name,
                       key_prefix=key_prefix) as redlock:
        one = redlock.try_acquire("single", 10)
        many = redlock.acquire_many(["m1", "m2"], 10).acquired
        assert one is not None and len(many) == 2
        assert redlock.release(one) and redlock.release_many(many) == [True, True]
        for lease in (one, *many):
            assert lease.status.value == "unlocked" and lease.valid_for() == 0.0
            with pytest.raises(LockLostError, match="was released"):
                lease.ensure_held()
