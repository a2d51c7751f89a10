"""A process forked while its parent was closing a Redis Cluster client: the parent's close is the
parent's, and the child's client is open (as one server's is, tests/test_close_part_way.py). The
cluster's subscribers had been stopped by the parent's close as it began, and the child kept that:
its blocking acquire of a held lock raised ClientClosedError at once while ``closed`` said False."""

from __future__ import annotations

import threading
import time

import pytest

from _forking import in_forked_child
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the client's rule: no core's own


def _name_off(cluster: RedisCluster, prefix: bytes, port: int, stem: str) -> str:
    """A name whose key's master is not the one on ``port``."""
    return next(name for i in range(10_000) if cluster.master_of(
        key_slot(prefix + (name := f"{stem}{i}").encode())).port != port)


def test_a_child_forked_during_a_cluster_close_can_still_wait_for_a_lock(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str) -> None:
    client = ClusterLockClient.from_url(quiet_cluster.url, core=core_name, key_prefix=key_prefix, timeout=3.0)
    try:
        renewed = client.try_acquire("renewed", 30, auto_renew=True)
        assert renewed is not None
        paused = quiet_cluster.master_of(key_slot(client.key_prefix + b"renewed"))
        busy = _name_off(quiet_cluster, client.key_prefix, paused.port, "busy")
        assert client.try_acquire(busy, 3) is not None  # held: the child's acquire must wait for it
        assert client.lock(busy, 10).acquire(timeout=0.1) is False  # the parent's subscribers are made
        paused.pause()
        closer = threading.Thread(target=client.close, daemon=True)
        try:
            closer.start()
            time.sleep(0.3)  # close() has stopped the waiters and is releasing the renewed lock

            def work() -> str:
                begun = time.monotonic()
                try:
                    got: object = client.lock(busy, 10).acquire(timeout=8)
                except Exception as exc:
                    got = f"{type(exc).__name__}: {exc}"
                waited = time.monotonic() - begun > 0.3
                return f"closed={client.closed} blocking_acquire={got!r} after_ttl={waited}"

            reported = in_forked_child(work, paused.resume)
        finally:
            paused.resume()
        closer.join(10)
        assert reported == "closed=False blocking_acquire=True after_ttl=True", reported
    finally:
        client.close()
