"""A bulk call on Redis Cluster whose first round lost one master's replies (paused: maybe run)
and whose resend of a MOVED item then failed outright (the slot's new master is gone, its
connection refused): the lost replies are still the caller's to settle (found in review). The
call raised the resend's ConnectionError and dropped them: a bulk acquire's lock on the paused
master stayed held by nobody until its ttl, a bulk release's outcome went unnamed. Now the
resend's failed items are maybe-run too, as a failed master's are in the first round: the call
raises ``AcquireOutcomeUnknownError`` / ``OutcomeUnknownError`` naming them, and what they may
have taken or kept is released in the background."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from _blocking_async import FRONTS
from _eventually import eventually
from turbolock import AcquireOutcomeUnknownError, OutcomeUnknownError
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import cluster_fronts, move_slot, names_on

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the routes' rule: no core's own

T = 0.5
TTL = 60


@pytest.mark.parametrize("op", ["acquire_many", "release_many"])
@pytest.mark.parametrize("front", FRONTS)
def test_lost_replies_are_settled_when_a_resend_fails(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str, op: str) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    a, b, c = cluster.nodes[:3]
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=T, connect_timeout=T,
                            chunk_size=1)
    try:
        client = fronts.make()
        a1, moving = names_on(cluster, key_prefix, a.port, 2, "a")
        b1 = names_on(cluster, key_prefix, b.port, 1, "b")[0]
        held = client.acquire_many([a1, b1, moving], TTL)  # the map read, a connection to each master
        assert held.all_acquired
        if op == "acquire_many":
            assert all(client.release_many(held.acquired))
        moving_key = (key_prefix + moving).encode()
        # ``moving``'s slot goes to c behind the client's back, then c dies: its MOVED is
        # followed to a refused connection.
        move_slot(cluster, raws, a, c, key_slot(moving_key), [] if op == "acquire_many" else [moving_key])
        c.kill()
        b.pause()
        try:
            with pytest.raises(OutcomeUnknownError) as caught:
                if op == "acquire_many":
                    client.acquire_many([a1, b1, moving], TTL)
                else:
                    client.release_many(held.acquired)
        finally:
            b.resume()
        error = caught.value
        if op == "acquire_many":
            assert isinstance(error, AcquireOutcomeUnknownError), repr(error)
            assert [lease.name for lease in error.acquired] == [a1]
            assert client.release_many(error.acquired) == [True]
        assert b1 in (error.names or []), f"{b1}'s lost outcome not named: {error!r}"
        key_b = (key_prefix + b1).encode()
        assert eventually(lambda: not raws(b).exists(key_b), 5.0), (
            f"{b1}'s lock, which the lost batch {'took' if op == 'acquire_many' else 'kept'}, is left held")
    finally:
        fronts.close()
