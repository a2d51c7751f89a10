"""The reshard test's one CI failure, at its scale: 3000 locks (ttl 3 s) over every slot, 1000
of node 0's slots moved to node 1 between two renewal rounds (as ``redis-cli --cluster reshard``
does, only faster), and the third master, which takes no part in the move, answers late once (a
0.9 s stall, well under the node timeout: the cluster stays healthy, as on a loaded CI host).
Every lock of the moved slots (~180) was reported lost (found in review): the redo of the keys
node 0 answered -1 for waits for every master's answer, and then spent what was left of the
round on a MOVED round trip and a map copy per item; a round that ends that late leaves no time
for a retry. The redo reads the map once now, and sends each key where it went."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from _lost_locks import LostLocks
from _raw import NodeRaws
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import node_id, slot_owners

TTL = 3.0


def _move_slots(raws: NodeRaws, source: RedisServer, target: RedisServer, third: RedisServer,
                slots: list[int]) -> None:
    src, dst, other = raws(source), raws(target), raws(third)
    src_id, dst_id = node_id(src), node_id(dst)
    pipe = dst.pipeline(transaction=False)
    for slot in slots:
        pipe.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    pipe.execute()
    pipe = src.pipeline(transaction=False)
    for slot in slots:
        pipe.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    pipe.execute()
    pipe = src.pipeline(transaction=False)
    for slot in slots:
        pipe.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
    pipe_migrate = src.pipeline(transaction=False)
    for found in pipe.execute():  # MIGRATE ... KEYS takes the keys of one slot
        if found:
            pipe_migrate.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *found)
    pipe_migrate.execute()
    for node in (dst, src, other):  # the target first, then the source, then the others
        pipe = node.pipeline(transaction=False)
        for slot in slots:
            pipe.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        pipe.execute()


# One core: the fault was in the flows. Not in the timing run: a cluster and 3000 locks are a CPU
# burst there, where the other tests need their slack; it passed beside three CPU hogs on 2 cores.
@pytest.mark.parametrize("core_name", ["c"], indirect=True)
def test_a_reshard_between_rounds_and_one_slow_master_lose_no_lock(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, raws: NodeRaws) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    client = make_cluster_client(cluster)
    source, target, third = cluster.nodes[:3]
    owners = slot_owners(cluster)
    moved = [slot for slot in range(16384) if owners[slot] == source.port][:1000]
    names = [f"shard:{i}" for i in range(3000)]
    lost = LostLocks()
    acquired = time.monotonic()
    leases = client.acquire_many(names, TTL, auto_renew=True, on_lost=lost).acquired
    assert len(leases) == 3000
    _move_slots(raws, source, target, third, moved)
    assert time.monotonic() - acquired < 1.5, "the move must end before the first renewal round (at 2 s)"
    moved_set = set(moved)
    on_moved = [name for name in names if key_slot((key_prefix + name).encode()) in moved_set]
    on_third = [name for name in names if owners[key_slot((key_prefix + name).encode())] == third.port]
    # The third master stalls from just before the round (due at 2 s) for 0.9 s.
    time.sleep(max(0.0, acquired + 2 * TTL / 3 - 0.05 - time.monotonic()))
    third.pause()
    threading.Timer(0.9, third.resume).start()
    time.sleep(TTL + 0.5)
    stalled_lost = [name for name in lost.names if name in set(on_third)]
    assert stalled_lost == [], "the stalled master's own locks were lost: the stall was too long"
    moved_lost = [name for name in lost.names if name in set(on_moved)]
    assert lost.names == [], (f"{len(moved_lost)} of the {len(on_moved)} locks of the moved slots and "
                              f"{len(lost.names) - len(moved_lost)} others reported lost")
    assert all(info.held for info in client.query_many(names)), "an auto-renewed lock expired"
