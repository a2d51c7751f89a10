"""Auto-renewal in one asyncio task on the core's timer wheel: renewed locks outlive their ttl,
lost ones are always signalled (lease.lost, on_lost, wait_lost), close releases what it renews."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from async_helpers import NewClient, Runner, keys_left

from turbolock import AutoRenew, ClientClosedError, InvalidArgumentError, Lease, LockLostError, TimeoutError
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # renewals must land within ttls of a second or two

# Short ttls keep the tests quick; the call timeout must stay below renew_before (ttl / 3).
TTL = 0.45
BULK_TTL = 1.0
CALL_TIMEOUT = 0.1


def test_renewed_lock_outlives_its_ttl_many_times(arun_asyncio: Runner, new_client: NewClient,
                                                  raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(timeout=CALL_TIMEOUT) as client:
            lease = await client.try_acquire("long-job", TTL, auto_renew=True)
            assert lease is not None and lease.auto_renew and client.renewing == 1
            lock = client.lock("long-lock", TTL, auto_renew=True)
            await lock.acquire()
            key = client.key_prefix + b"long-job"
            await asyncio.sleep(TTL * 3)
            assert raw.get(key) == lease.token
            assert not lease.is_lost and lease.valid_for() > 0
            lease.ensure_held()
            lock.ensure_held()
            assert lease.renewal is not None and lease.renewal.renewals >= 3
            assert await lock.owned()
            assert await client.release(lease) is True
            await lock.release()
            assert keys_left(raw, client.key_prefix) == []
            assert client.renewing == 0

    arun_asyncio(body)


def test_lost_locks_are_signalled_every_way(arun: Runner, new_client: NewClient, raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(timeout=CALL_TIMEOUT) as client:
            called: list[str | bytes] = []
            awaited: list[str | bytes] = []

            def on_lost(lease: Lease) -> None:
                called.append(lease.name)

            async def on_lost_async(lease: Lease) -> None:
                await asyncio.sleep(0)
                awaited.append(lease.name)

            deleted = await client.try_acquire("deleted", TTL, auto_renew=True, on_lost=on_lost)
            stolen = await client.try_acquire("stolen", TTL, auto_renew=True, on_lost=on_lost_async)
            kept = await client.try_acquire("kept", TTL, auto_renew=True, on_lost=on_lost)
            assert deleted and stolen and kept
            raw.delete(client.key_prefix + b"deleted")
            raw.set(client.key_prefix + b"stolen", b"thief", px=60000)
            waits = await asyncio.gather(client.wait_lost(deleted), client.wait_lost(stolen, TTL * 2),
                                         client.wait_lost(kept, TTL))
            assert waits == [True, True, False]
            await asyncio.sleep(0.01)
            assert called == ["deleted"] and awaited == ["stolen"]
            assert deleted.lost.is_set() and deleted.valid_for() == 0.0
            with pytest.raises(LockLostError, match="stolen"):
                stolen.ensure_held()
            assert await client.wait_lost(stolen) is True  # already lost: at once
            assert raw.get(client.key_prefix + b"stolen") == b"thief"
            assert not kept.is_lost and client.renewing == 1

            # Released while someone waits: the wait ends, not lost.
            waiter = asyncio.ensure_future(client.wait_lost(kept))
            await asyncio.sleep(0.01)
            assert await client.release(kept)
            assert await waiter is False
            assert await client.wait_lost(kept) is False  # released: never lost
            raw.delete(client.key_prefix + b"stolen")

    arun(body)


def test_bulk_renewal_with_some_stolen(arun_asyncio: Runner, new_client: NewClient, raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(timeout=CALL_TIMEOUT) as client:
            # The connect shares the 0.1 s call timeout: on a busy CI host it may need another go.
            for _ in range(20):
                try:
                    await client.query("warm-up")
                    break
                except TimeoutError:
                    continue
            names = [f"b{i}" for i in range(3000)]
            # A longer ttl than the single locks': 3000 renewals, then 3000 queries and releases
            # on the pure core of a loaded host must all fit in what a renewal leaves.
            result = await client.acquire_many(names, BULK_TTL, auto_renew=True)
            assert result.all_acquired and client.renewing == 3000
            for name in names[:10]:
                raw.set(client.key_prefix + name.encode(), b"thief", px=60000)
            await asyncio.sleep(BULK_TTL * 2)
            assert sorted(result.lost) == sorted(names[:10])  # type: ignore[type-var]
            assert client.renewing == 2990
            assert all(info.held for info in await client.query_many(names))
            assert sum(await client.release_many(result.acquired)) == 2990
            for name in names[:10]:
                raw.delete(client.key_prefix + name.encode())

    arun_asyncio(body)


@pytest.mark.parametrize("moment", ["before-renewal", "mid-renewal"])
def test_close_stops_renewal_and_releases(arun_asyncio: Runner, new_client: NewClient, raw: redis.Redis,
                                          moment: str) -> None:
    # A longer ttl and call timeout than the other tests: 4,000 renewals on the pure core of a busy
    # CI machine can take longer than 0.1 s, and locks lost that way never renew again.
    ttl, call_timeout = 1.5, 0.4

    async def body() -> None:
        client = new_client(timeout=call_timeout)
        result = await client.acquire_many([f"c{i}" for i in range(4000)], ttl, auto_renew=True)
        assert result.all_acquired
        single = await client.try_acquire("single", ttl, auto_renew=AutoRenew(max_renewals=5))
        assert single is not None
        if moment == "mid-renewal":
            # Renewal starts at ttl - renew_before = 1 s; close while its script is in flight,
            # so the cancelled renewal's replies must not be taken for the releases' ones.
            await asyncio.sleep(0.9)
            give_up = time.monotonic() + ttl * 2
            while not any(conn.pending for conn in client._pool.connections):
                if time.monotonic() > give_up:
                    pytest.fail("no renewal went out")
                await asyncio.sleep(0)
            assert not single.is_lost and result.lost == []
        await client.close()
        assert client.renewing == 0
        assert keys_left(raw, client.key_prefix) == []
        with pytest.raises(ClientClosedError, match="closed"):
            client._renewer().add([single], AutoRenew(renew_before=0.2), None)

    arun_asyncio(body)


def test_restart_without_persistence_is_reported_lost(arun: Runner, own_server: RedisServer,
                                                      core_name: str) -> None:
    from turbolock.asyncio import AsyncLockClient

    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, timeout=CALL_TIMEOUT) as client:
            lease = await client.try_acquire("restarted", TTL, auto_renew=True)
            assert lease is not None
            await asyncio.to_thread(own_server.restart)
            assert await client.wait_lost(lease, TTL * 3)
            assert lease.lost_reason is not None

    arun(body)


def test_bad_renewal_settings_are_refused_before_sending(new_client: NewClient) -> None:
    client = new_client(timeout=CALL_TIMEOUT)

    async def attempt(**kwargs: object) -> None:
        await client.try_acquire("x", TTL, **kwargs)  # type: ignore[arg-type]

    for kwargs, argument in [({"on_lost": print}, "on_lost"),
                             ({"auto_renew": "yes"}, "auto_renew"),
                             ({"auto_renew": AutoRenew(renew_before=0.04)}, "renew_before"),
                             ({"auto_renew": AutoRenew(renew_before=TTL)}, "renew_before"),
                             ({"auto_renew": AutoRenew(max_renewals=-1)}, "max_renewals"),
                             ({"auto_renew": AutoRenew(max_hold=0)}, "max_hold"),
                             ({"auto_renew": True, "on_lost": 5}, "on_lost")]:
        coro = attempt(**kwargs)
        with pytest.raises((InvalidArgumentError, TypeError)) as raised:
            coro.send(None)
        assert raised.value.argument == argument  # type: ignore[union-attr]
        with pytest.raises((InvalidArgumentError, TypeError)):
            client.lock("x", TTL, **kwargs)  # type: ignore[arg-type]
