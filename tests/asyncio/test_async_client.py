"""The asyncio client's single-lock API against a real server, on both cores and both loops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis
import redis.asyncio as redis_asyncio
from async_helpers import NewClient, Runner

from turbolock import ConnectionError, Lease, LockInfo, OutcomeUnknownError, ResponseError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


def test_acquire_is_set_nx_px_with_a_random_128_bit_token(arun: Runner, raw: redis.Redis,
                                                          new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client() as client:
            lease = await client.try_acquire("order:42", 10)
            assert isinstance(lease, Lease) and lease.name == "order:42"
            key = client.key_prefix + b"order:42"
            assert raw.get(key) == lease.token and len(lease.token) == 16
            assert 9000 < raw.pttl(key) <= 10000
            assert await client.try_acquire("order:42", 10) is None
            other = await client.try_acquire("order:43", 10)
            assert other is not None and other.token != lease.token
            assert await client.release(lease) is True
            assert await client.release(other) is True
            assert raw.exists(key) == 0

    arun(body)


def test_release_extend_check_query_touch_only_our_own_key(arun: Runner, raw: redis.Redis,
                                                           new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client() as client:
            key = client.key_prefix + b"mine"
            lease = await client.try_acquire("mine", 5, token=b"t" * 16)
            assert lease is not None and raw.get(key) == b"t" * 16
            info = await client.query("mine")
            assert info.held and info.remaining is not None and 4 < info.remaining <= 5
            assert await client.query("free") == LockInfo(False, None)
            remaining = await client.check(lease)
            assert remaining is not None and 4 < remaining <= 5
            assert await client.extend(lease, 30) is True
            assert 29000 < raw.pttl(key) <= 30000 and lease.ttl_ms == 30000
            raw.set(key, b"someone else", px=60000)
            assert await client.check(lease) is None
            assert await client.extend(lease, 10) is False
            assert await client.release(lease) is False
            assert raw.get(key) == b"someone else"
            raw.delete(key)

    arun(body)


def test_expired_lock_is_free_and_old_holder_cannot_touch_it(arun: Runner,
                                                             new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client() as client:
            old = await client.try_acquire("short", 0.05)
            assert old is not None
            await asyncio.sleep(0.08)
            assert old.valid_for() == 0.0
            new = await client.try_acquire("short", 5)
            assert new is not None
            assert await client.release(old) is False and await client.extend(old, 5) is False
            assert (await client.query("short")).held
            assert await client.release(new) is True

    arun(body)


def test_scripts_reload_after_script_flush(arun: Runner, new_client: Callable[..., AsyncLockClient],
                                          raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client() as client:
            leases = [await client.try_acquire(f"f{i}", 10) for i in range(3)]
            raw.script_flush()
            assert await client.extend(leases[0], 20) is True
            raw.script_flush()
            # Concurrent calls all find NOSCRIPT; each reloads and retries, in order.
            results = await asyncio.gather(*(client.release(lease) for lease in leases if lease))
            assert results == [True, True, True]

    arun(body)


def test_wrongtype_is_a_response_error(arun: Runner, new_client: Callable[..., AsyncLockClient],
                                       raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client() as client:
            lease = await client.try_acquire("typed", 10)
            assert lease is not None
            key = client.key_prefix + b"typed"
            raw.delete(key)
            raw.rpush(key, b"x")
            for call in (client.release(lease), client.extend(lease, 5), client.check(lease)):
                with pytest.raises(ResponseError) as raised:
                    await call
                assert raised.value.code == "WRONGTYPE" and "typed" in str(raised.value)
            raw.delete(key)

    arun(body)


def test_commands_of_one_loop_iteration_leave_in_one_write(arun_asyncio: Runner,
                                                           new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client(max_connections=1) as client:
            await client.query("warm-up")
            (conn,) = client._pool.connections
            transport = conn._transport
            writes: list[int] = []
            write = transport.write  # type: ignore[union-attr]

            def counting_write(data: bytes) -> None:
                writes.append(len(data))
                write(data)

            transport.write = counting_write  # type: ignore[union-attr,method-assign]
            infos = await asyncio.gather(*(client.query(f"q{i}") for i in range(100)))
            assert infos == [LockInfo(False, None)] * 100
            assert len(writes) == 1, writes
            leases = await asyncio.gather(*(client.try_acquire(f"p{i}", 10) for i in range(64)))
            assert all(leases) and len(writes) == 2
            assert await asyncio.gather(*(client.release(lease) for lease in leases if lease)) == [True] * 64
            assert len(writes) == 3

    arun_asyncio(body)


@pytest.mark.parametrize("connections", [1, 3])
def test_replies_are_matched_in_order_across_connections(arun: Runner, connections: int,
                                                         new_client: Callable[..., AsyncLockClient],
                                                         raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(max_connections=connections) as client:
            held = [f"h{i}" for i in range(0, 300, 3)]
            for name in held:
                raw.set(client.key_prefix + name.encode(), b"x", px=(1 + int(name[1:])) * 1000)
            names = [f"h{i}" for i in range(300)]
            # Connections open one at a time, on demand: by the last round every one carries calls.
            for _ in range(connections + 1):
                infos = await asyncio.gather(*(client.query(name) for name in names))
                for name, info in zip(names, infos, strict=True):
                    assert info.held == (name in held), name
                    if info.held:
                        assert info.remaining is not None and info.remaining > int(name[1:])
            assert len(client._pool.connections) == connections

    arun(body)


def test_two_clients_on_one_key_exclude_each_other(arun: Runner,
                                                  new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client() as first, new_client() as second:
            lease = await first.try_acquire("shared", 10)
            assert lease is not None
            assert await second.try_acquire("shared", 10) is None
            assert await first.release(lease)
            other = await second.try_acquire("shared", 10)
            assert other is not None and await second.release(other)

    arun(body)


def test_calls_after_close_raise_connection_error(arun: Runner,
                                                 new_client: NewClient) -> None:
    async def body() -> None:
        client = new_client()
        lease = await client.try_acquire("x", 10)
        assert lease is not None
        await client.close()
        await client.close()  # idempotent
        assert client.closed
        calls = [client.try_acquire("y", 10), client.query("x"), client.check(lease),
                 client.acquire_many(["a", "b"], 10), client.query_many(["a", "b"]),
                 client.release_many([lease]), client.extend_many([lease], 10),
                 client.lock("z", 10).acquire(blocking=False), client.release(lease),
                 client.extend(lease, 10)]
        for call in calls:
            with pytest.raises(ConnectionError) as raised:
                await call
            assert not isinstance(raised.value, OutcomeUnknownError), str(raised.value)
        assert client.pending_cleanup == 0

    arun(body)


def test_from_redis_and_unix_socket_and_db(arun: Runner, redis_server: RedisServer, core_name: str,
                                          key_prefix: str, raw: redis.Redis) -> None:
    async def body() -> None:
        source = redis.Redis(host=redis_server.host, port=redis_server.port, db=3)
        async with AsyncLockClient.from_redis(source, core=core_name, key_prefix=key_prefix) as client:
            assert client.options.db == 3 and client.implementation == core_name
            lease = await client.try_acquire("db3", 10)
            assert lease is not None
            db3 = redis.Redis(host=redis_server.host, port=redis_server.port, db=3)
            assert db3.get(client.key_prefix + b"db3") == lease.token
            assert raw.exists(client.key_prefix + b"db3") == 0
            assert await client.release(lease)
            db3.close()
        source.close()
        async_source = redis_asyncio.Redis(host=redis_server.host, port=redis_server.port, db=5)
        async with AsyncLockClient.from_redis(async_source, core=core_name, key_prefix=key_prefix) as client:
            assert client.options.db == 5
            lease = await client.try_acquire("db5", 10)
            assert lease is not None and await client.release(lease)
        await async_source.aclose()
        url = f"unix://{redis_server.unix_socket}?db=2"
        async with AsyncLockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
            lease = await client.try_acquire("unix", 10)
            assert lease is not None and await client.release(lease)

    arun(body)


def test_repr_and_properties(new_client: Callable[..., AsyncLockClient], core_name: str) -> None:
    client = new_client(chunk_size=500, max_connections=3)
    assert client.implementation == core_name and client.chunk_size == 500 and client.max_connections == 3
    assert repr(client).startswith("AsyncLockClient(127.0.0.1:")
    assert client.renewing == 0 and client.pending_cleanup == 0
