"""A Redis Cluster client's close() serves the calls under way to their end, the steps a call
makes after its first included, and refuses new ones, also in a child forked while it waits
(found in review of the change that made close() wait for the calls under way: those steps,
themselves counted as calls, were refused):

- an all-or-nothing acquire_many that took one lock and found the other held gives it back:
  refused, the call said "nothing acquired" while its lock stayed for its whole ttl, nobody
  owing its release;
- a claim whose master no longer serves its names (the slot moved) gives back that part and
  claims them where they are now: refused, the claim raised the node's error;
- a child forked as close() waits keeps refusing calls (its count of calls was made anew, and
  its client, closed, served a try_acquire)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from _forking import in_forked_child
from _in_thread import InThread
from _raw import NodeRaws
from turbolock import ClientClosedError
from turbolock._wire.slots import key_slot
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._helpers import move_slot, names_on

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # routing and closing: no core's own

T = 2.0
SLACK = 1.0


def _client(cluster: RedisCluster, front: str, core_name: str, key_prefix: str) -> Any:
    made = ClusterLockClient if front == "threads" else AsyncClusterLockClient
    return made.from_url(cluster.url, core=core_name, key_prefix=key_prefix, timeout=T)


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_an_all_or_nothing_acquire_gives_back_what_it_took_as_the_client_closes(
        quiet_cluster: RedisCluster, raws: NodeRaws, core_name: str, key_prefix: str, front: str) -> None:
    cluster = quiet_cluster
    master = cluster.nodes[0]
    free, held = names_on(cluster, key_prefix, master.port, 2, "aon")
    raw = raws(master)
    raw.set(key_prefix + held, b"someone else", px=30000)
    client = _client(cluster, front, core_name, key_prefix)
    loop = asyncio.new_event_loop()

    def run(call: Any) -> Any:
        return call if front == "threads" else loop.run_until_complete(call)

    async def beside(acquiring: Any) -> object:
        task = asyncio.ensure_future(acquiring)
        await asyncio.sleep(0.1)
        await client.close()
        return (await asyncio.gather(task, return_exceptions=True))[0]

    assert run(client.query(free)).held is False  # the map, a connection to the master
    master.pause()  # the acquire is written; its replies wait
    try:
        def acquiring() -> Any:
            return client.acquire_many([free, held], 30, all_or_nothing=True)

        if front == "threads":
            acquirer = InThread(acquiring)
            time.sleep(0.1)
            closer = InThread(client.close)
        else:
            acquirer = closer = InThread(lambda: loop.run_until_complete(beside(acquiring())))
        time.sleep(0.3)
    finally:
        master.resume()
    closer.join(T + SLACK)
    result = acquirer.join(T + SLACK)
    loop.close()
    left = raw.pttl(key_prefix + free)
    assert left < 0, f"the acquire got {result!r} as the client closed; its lock on {free!r} stays {left} ms"
    assert not isinstance(result, Exception) and result.acquired == [], result


def test_a_claim_follows_its_names_slot_as_the_client_closes(
        quiet_cluster: RedisCluster, raws: NodeRaws, core_name: str, key_prefix: str) -> None:
    cluster = quiet_cluster
    source, target = cluster.nodes[0], cluster.nodes[1]
    name = names_on(cluster, key_prefix, source.port, 1, "claimed")[0]
    key = (key_prefix + name).encode()
    client = ClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix, timeout=T)
    assert client.query(name).held is False  # the map, a connection to the source
    move_slot(cluster, raws, source, target, key_slot(key), [])  # behind the client's back
    try:
        source.pause()
        try:
            claimer = InThread(lambda: client.acquire_many([name], 30, limit=1))
            time.sleep(0.1)
            closer = InThread(client.close)
            time.sleep(0.2)
        finally:
            source.resume()
        closer.join(T + SLACK)
        got = claimer.join(T + SLACK)
    finally:
        move_slot(cluster, raws, target, source, key_slot(key), [key] if raws(target).exists(key) else [])
    assert not isinstance(got, Exception), f"the claim under way as the client closed got {got!r}"
    assert [lease.name for lease in got.acquired] == [name], got


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_child_forked_as_close_waits_refuses_calls(
        quiet_cluster: RedisCluster, raws: NodeRaws, core_name: str, key_prefix: str, front: str) -> None:
    cluster = quiet_cluster
    slow, other = cluster.nodes[0], cluster.nodes[1]
    job = names_on(cluster, key_prefix, slow.port, 1, "job")[0]
    late = names_on(cluster, key_prefix, other.port, 1, "late")[0]
    client = _client(cluster, front, core_name, key_prefix)
    loop = asyncio.new_event_loop()  # the parent's (the child runs its own)

    def run(call: Any) -> Any:
        return call if front == "threads" else loop.run_until_complete(call)

    def child() -> str:
        try:
            got: object = client.try_acquire(late, 30) if front == "threads" else asyncio.run(
                client.try_acquire(late, 30))
        except ClientClosedError as exc:
            got = exc
        return repr(got)

    async def beside(releasing: Any) -> None:
        task = asyncio.ensure_future(releasing)
        await asyncio.sleep(0.1)
        await client.close()
        await asyncio.gather(task, return_exceptions=True)

    lease = run(client.try_acquire(job, 30))
    assert lease is not None
    assert run(client.query(late)).held is False  # a connection to the other master too
    slow.pause()  # the release waits for it: close() waits for the release
    try:
        if front == "threads":
            releaser = InThread(lambda: client.release(lease))
            time.sleep(0.1)
            closer = InThread(client.close)
        else:
            releaser = closer = InThread(lambda: loop.run_until_complete(beside(client.release(lease))))
        time.sleep(0.3)
        waiting = client.closed and closer.is_alive()
        seen = in_forked_child(child)
    finally:
        slow.resume()
    closer.join(T + SLACK)
    releaser.join(T + SLACK)
    loop.close()
    assert waiting, "close() was not waiting for the release when the child forked"
    assert seen.startswith("ClientClosedError"), f"the child's try_acquire got {seen}"
    assert raws(other).exists(key_prefix + late) == 0
