"""Cluster renewal's redo retry (``_redo_flow``) kept each key's outcome from the last try only
(found in review). The first try writes the renewal to the slot's new master (stopped: SIGSTOP, as a stalled
host) on the connection it had and gets no reply: UNKNOWN, it may still run. It is tried again
on a new connection, whose handshake the stopped master does not answer: NOT_SENT, and so
are the later tries; the round reports NOT_SENT. The renewer then counts that renewal as never
sent (``commands_refused``, no ``lease._ghost``): a lease lost that way is not released in the
background (``lose_unrenewed``), yet the master runs the buffered renewal as it resumes and
holds the key for a full ttl after the program was told the lock is lost. A key sent without a
reply now stays UNKNOWN whatever a later try meets."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from _raw import NodeRaws
from turbolock._wire.outcomes import UNKNOWN, failures
from turbolock._wire.scripts import RENEW_MANY
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._helpers import move_slot, names_on

TTL_MS = 20000


@pytest.mark.parametrize("core_name", ["c"], indirect=True)
def test_a_redo_written_without_reply_stays_unknown(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str, raws: NodeRaws) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    client = ClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix, timeout=2.0)
    stalled = max(cluster.nodes[:3], key=lambda node: node.port)  # asked last for the map
    try:
        source = next(node for node in cluster.nodes[:3] if node.port != stalled.port)
        name = names_on(cluster, key_prefix, source.port, 1, "moving")[0]
        warm = names_on(cluster, key_prefix, stalled.port, 1, "warm")[0]
        lease = client.try_acquire(name, TTL_MS / 1000)
        assert lease is not None
        client.query(warm)  # an idle connection to the slot's new master in its pool
        key = (key_prefix + name).encode()
        slot = key_slot(key)
        dst = raws(stalled)
        dst.script_load(RENEW_MANY.source)  # as after any earlier renewal there
        move_slot(cluster, raws, source, stalled, slot, [key])
        dst.pexpire(key, 5000)  # so the renewal running later is plain to see
        stalled.pause()
        try:
            reply = client._cluster.renew([(TTL_MS, [lease])], time.monotonic() + 1.5)[0]
        finally:
            stalled.resume()
        time.sleep(0.3)
        ran = dst.pttl(key)
        outcome = failures(reply, 1)
        assert outcome is not None and len(outcome) == 1, reply
        assert ran > 10000, f"the renewal did not run when the master resumed (pttl {ran})"
        assert outcome[0][1] is UNKNOWN, (
            f"the renewal was written and ran once the master resumed (pttl {ran} ms), yet the round says "
            f"{outcome[0][1]!r}, not UNKNOWN: the renewer counts it as never sent")
    finally:
        client.close()
