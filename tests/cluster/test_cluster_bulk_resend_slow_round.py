"""A bulk acquire on a cluster resends its redirected items while its time allows, however slow
its first round was: a master stalling 0.45 s of a 1 s timeout, one item MOVED to a healthy
master, 0.55 s left: the resend (milliseconds) is made and every name acquired. (A guard asking
twice the whole round's time for the resend refused it: found in review, and dropped.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.errors import AcquireOutcomeUnknownError
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import finish_slot_move, names_on, other_master, start_slot_move

T = 1.0


@pytest.mark.parametrize("stall", [0.1, 0.45], ids=["stall-0.1-control", "stall-0.45"])
def test_a_bulk_resend_of_a_moved_item_after_a_slow_round(
        stall: float, own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis]) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    client = ClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix, timeout=T)
    try:
        source = cluster.nodes[0]
        names = names_on(cluster, key_prefix, source.port, 20, "bulk")
        moved_name = names[-1]
        slot = key_slot((key_prefix + moved_name).encode())
        assert client.query(names[0]).held is False  # the client has read the map
        target = other_master(cluster, source)
        src, dst = raws(source), raws(target)
        target_id = start_slot_move(src, dst, slot)
        finish_slot_move(src, dst, target, slot, [], target_id)  # the client's map is now stale
        # Only names the source still serves, plus the moved one (MOVED on the first round).
        names = [n for n in names[:-1] if key_slot((key_prefix + n).encode()) != slot] + [moved_name]
        source.pause()
        resumer = threading.Timer(stall, source.resume)
        resumer.start()
        started = time.monotonic()
        error = None
        try:
            result = client.acquire_many(names, 30)
            acquired = result.acquired
        except AcquireOutcomeUnknownError as exc:
            error, acquired = exc, list(exc.acquired)
        finally:
            resumer.join()
            source.resume()
        took = time.monotonic() - started
        got = [lease.name for lease in acquired]
        client.release_many(acquired)
        assert len(got) == len(names), (
            f"{len(got)} of {len(names)} acquired in {took:.2f} s of a {T} s timeout; missing "
            f"{sorted(set(names) - set(got))} (the MOVED item was not resent with "
            f"{T - took:.2f} s left); error: {error!r}, not_sent={getattr(error, 'not_sent', None)!r}")
    finally:
        client.close()
