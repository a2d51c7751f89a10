"""AsyncClusterLockClient: every call on the master of its key's slot, bulk calls across masters,
auto-renewal on every master (with an unrenewed control), a slot moved under the client
(MOVED followed), cancelled acquires that leave no lock, and bad settings refused."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from _raw import NodeRaws
from turbolock import InvalidArgumentError
from turbolock._wire.slots import key_slot
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._helpers import node_id, other_master


def _run(body: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(body(), 60)
    return asyncio.run(bounded())


def _client(cluster: RedisCluster, core_name: str, key_prefix: str, **options: Any) -> AsyncClusterLockClient:
    return AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix, **options)


def test_every_call_goes_to_the_master_of_its_slot(cluster: RedisCluster, core_name: str, key_prefix: str,
                                                   raws: NodeRaws) -> None:
    prefix = key_prefix.encode()

    async def body() -> None:
        async with _client(cluster, core_name, key_prefix) as client:
            lease = await client.try_acquire("order:1", 10)
            assert lease is not None
            master = cluster.master_of(key_slot(prefix + lease.key))
            assert raws(master).get(prefix + lease.key) == lease.token
            assert await client.try_acquire("order:1", 10) is None
            assert await client.extend(lease, 20)
            left = await client.check(lease)
            assert left is not None and 19 < left <= 20
            assert await client.release(lease) and raws(master).get(prefix + lease.key) is None
            names = [f"seat:{i}" for i in range(300)]
            result = await client.acquire_many(names, 10)
            assert len(result.acquired) == 300
            ports = {cluster.master_of(key_slot(prefix + lease.key)).port for lease in result.acquired}
            assert len(ports) == cluster.masters, "the names must span every master"
            assert sum(info.held for info in await client.query_many(names)) == 300
            again = await client.acquire_many([*names[:10], "free"], 10)
            assert again.not_acquired == names[:10] and len(again.acquired) == 1
            assert await client.release_many([*result.acquired, *again.acquired]) == [True] * 301
            async with client.lock("nightly"):  # no ttl: 30 s, renewed
                assert client.renewing == 1
            assert client.renewing == 0 and not (await client.query("nightly")).held

    _run(body)


def test_auto_renewal_keeps_locks_on_every_master(cluster: RedisCluster, core_name: str,
                                                  key_prefix: str) -> None:
    async def body() -> None:
        async with _client(cluster, core_name, key_prefix) as client:
            names = [f"job:{i}" for i in range(200)]
            renewed = (await client.acquire_many(names, 0.6, auto_renew=True)).acquired
            plain = (await client.acquire_many([f"plain:{i}" for i in range(20)], 0.6)).acquired
            assert len(renewed) == 200 and len(plain) == 20
            await asyncio.sleep(2.0)  # over 3 ttls
            assert all(info.held for info in await client.query_many(names)), "a renewed lock expired"
            assert not any(info.held for info in await client.query_many([lease.name for lease in plain])), \
                "the control was not renewed and must have expired"
            assert await client.release_many(renewed) == [True] * 200

    _run(body)


def test_a_moved_slot_is_followed(own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
                                  raws: NodeRaws) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    tag = "{moving}"
    slot = key_slot(tag.encode())
    prefix = key_prefix.encode()

    async def body() -> None:
        async with _client(cluster, core_name, key_prefix) as client:
            held = await client.try_acquire(f"{tag}:0", 30)  # reads the map: the slot on its source
            assert held is not None
            source = cluster.master_of(slot)
            target = other_master(cluster, source)
            src, dst = raws(source), raws(target)
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(src))
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(dst))
            src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", prefix + held.key)
            for node in (src, dst):
                node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", node_id(dst))
            assert await client.try_acquire(f"{tag}:0", 30) is None  # MOVED, then found held there
            lease = await client.try_acquire(f"{tag}:1", 30)
            assert lease is not None and dst.get(prefix + lease.key) == lease.token
            assert await client.release_many([held, lease]) == [True, True]
            assert dst.dbsize() == 0 and src.dbsize() == 0

    _run(body)


def test_a_cancelled_acquire_never_leaves_a_lock(cluster: RedisCluster, core_name: str, key_prefix: str,
                                                 raws: NodeRaws) -> None:
    prefix = key_prefix.encode()

    async def body() -> None:
        async with _client(cluster, core_name, key_prefix) as client:
            await client.query("warm")  # the slot map is read
            finished = set()
            for k in range(8):
                name = f"cancelled:{k}"
                task = asyncio.ensure_future(client.try_acquire(name, 30))
                for _ in range(k):
                    await asyncio.sleep(0)
                task.cancel()
                try:
                    lease = await task
                except asyncio.CancelledError:
                    finished.add(False)
                else:
                    finished.add(True)
                    assert lease is not None and await client.release(lease)
                master = raws(cluster.master_of(key_slot(prefix + name.encode())))
                deadline = time.monotonic() + 5
                while master.get(prefix + name.encode()) is not None:
                    assert time.monotonic() < deadline, f"left behind when cancelled after {k} iterations"
                    await asyncio.sleep(0.01)
            assert False in finished, "the range must cover cancels before the reply"

    _run(body)


def test_a_claim_takes_k_free_names_across_masters(cluster: RedisCluster, core_name: str,
                                                   key_prefix: str) -> None:
    names = [f"shard:{i}" for i in range(600)]

    async def body() -> None:
        async with _client(cluster, core_name, key_prefix) as client:
            blocked = (await client.acquire_many(names[::3], 30)).acquired
            first = await client.acquire_many(names, 30, limit=40)
            second = await client.acquire_many(names, 30, limit=40)
            got = [lease.name for lease in first.acquired] + [lease.name for lease in second.acquired]
            assert len(got) == 80 and len(set(got)) == 80
            assert not set(got) & set(names[::3]), "a claim took a name held by another"
            assert await client.release_many([*blocked, *first.acquired, *second.acquired]) == [True] * 280

    _run(body)


def test_bad_settings_are_refused(cluster: RedisCluster) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        AsyncClusterLockClient.from_url(cluster.url.replace("/0", "/2"))
    assert info.value.argument == "db"

