"""Restarts, a server that is down, and one that stops answering: calls fail cleanly with
turbolock's errors, later calls work, no future is left hanging and no maybe-held lock is kept."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from async_helpers import Runner, keys_left, settle

from turbolock import (
    AcquireOutcomeUnknownError,
    ConnectionError,
    LockError,
    OutcomeUnknownError,
    TimeoutError,
)
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

GENEROUS = 5.0


def test_server_restart_under_load(arun: Runner, own_server: RedisServer, own_raw: redis.Redis,
                                   core_name: str, key_prefix: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=1,
                                            connect_timeout=1) as client:
            done = 0
            errors: list[BaseException] = []
            stop = False

            async def worker(task: int) -> None:
                nonlocal done
                while not stop:
                    try:
                        lease = await client.try_acquire(f"load:{task}", 30)
                        if lease is not None:
                            await client.release(lease)
                            done += 1
                    except LockError as exc:
                        errors.append(exc)
                        await asyncio.sleep(0.01)

            workers = [asyncio.ensure_future(worker(task)) for task in range(64)]
            await asyncio.sleep(0.2)
            before = done
            assert before > 0
            await asyncio.to_thread(own_server.restart)
            at_restart = done
            await asyncio.sleep(0.3)
            stop = True
            await asyncio.gather(*workers)
            assert errors, "a restart under load must fail some calls"
            assert all(isinstance(error, ConnectionError) for error in errors), {type(e) for e in errors}
            assert done > at_restart + 64, "calls must work again after the restart"
            await settle(client)
            assert keys_left(own_raw, key_prefix) == []

    arun(body)


def test_restart_while_the_loop_was_blocked(arun: Runner, own_server: RedisServer, core_name: str,
                                            key_prefix: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as client:
            lease = await client.try_acquire("before-restart", 60)
            assert lease is not None
            own_server.restart()  # blocks the loop: it has not seen the connection close
            assert (await client.query("before-restart")).held is False, "the next call works"
            assert await client.release(lease) is False, "no persistence: the lock is gone"
            again = await client.try_acquire("before-restart", 60)
            assert again is not None and await client.release(again)

    arun(body)


def test_calls_fail_while_down_and_work_once_back(arun: Runner, own_server: RedisServer, core_name: str,
                                                  key_prefix: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix,
                                            connect_timeout=2, timeout=2) as client:
            assert (await client.query("x")).held is False
            own_server.stop(remove_directory=False)
            try:
                await asyncio.sleep(0.05)  # the loop sees the connection close
                with pytest.raises(ConnectionError):
                    await client.query("x")
                with pytest.raises(ConnectionError) as raised:
                    await client.try_acquire("x", 10)
                assert not isinstance(raised.value, OutcomeUnknownError), "the SET never left the client"
                results = await asyncio.gather(*(client.try_acquire(f"y{i}", 10) for i in range(20)),
                                               return_exceptions=True)
                assert all(type(r) is ConnectionError for r in results), results
                assert client.pending_cleanup == 0
            finally:
                await asyncio.to_thread(own_server.start)
            lease = await client.try_acquire("x", 10)
            assert lease is not None
            assert await client.release(lease)

    arun(body)


def test_calls_in_flight_when_the_server_stops_answering(arun_asyncio: Runner, own_server: RedisServer,
                                                         own_raw: redis.Redis, core_name: str,
                                                         key_prefix: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix,
                                            timeout=0.15) as client:
            warm = await client.try_acquire("warm", 10)  # loads the scripts
            assert warm is not None and await client.release(warm)
            held = await client.try_acquire("held", 60)
            assert held is not None
            own_server.pause()
            try:
                # Sent together on the one warm connection (a new one's handshake would time out
                # before anything is sent): one deadline breaks it, every call is told its own way.
                started = time.monotonic()
                query, acquire, release, *many = await asyncio.gather(
                    client.query("x"), client.try_acquire("maybe-mine", 60), client.release(held),
                    *(client.try_acquire(f"many{i}", 60) for i in range(10)), return_exceptions=True)
                assert 0.14 <= time.monotonic() - started < GENEROUS, "fails by the call's deadline"
                assert isinstance(query, TimeoutError) and "127.0.0.1" in str(query)
                assert isinstance(acquire, AcquireOutcomeUnknownError), acquire
                assert isinstance(acquire, ConnectionError) and acquire.names == ["maybe-mine"]
                assert acquire.cleaned_up is False, "the server is paused: the release cannot have run"
                assert isinstance(release, OutcomeUnknownError) and release.names == ["held"]
                assert all(isinstance(r, AcquireOutcomeUnknownError) for r in many), many
                assert client.pending_cleanup == 12
            finally:
                own_server.resume()
            await settle(client)  # released in the background once the server answers
            assert keys_left(own_raw, key_prefix) == [], "maybe-held locks were not released"
            lease = await client.try_acquire("maybe-mine", 10)
            assert lease is not None and await client.release(lease)

    arun_asyncio(body)


def test_acquire_many_lost_mid_batch_is_cleaned_up(arun_asyncio: Runner, own_server: RedisServer,
                                                   own_raw: redis.Redis, core_name: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, timeout=0.15,
                                            chunk_size=1000) as client:
            assert (await client.query("warm-up")).held is False
            names = [f"job:{i}" for i in range(5000)]
            own_server.pause()
            try:
                with pytest.raises(AcquireOutcomeUnknownError) as caught:
                    await client.acquire_many(names, 60)
            finally:
                own_server.resume()
            error = caught.value
            # Two chunks were in flight when the server stopped answering; the rest never left.
            assert error.names == names[:2000]
            assert error.not_sent == names[2000:]
            assert error.acquired == [] and not error.cleaned_up
            assert client.pending_cleanup <= 2000
            await settle(client)  # in the background, with no further call
            assert keys_left(own_raw, client.key_prefix) == []

    arun_asyncio(body)


def test_release_many_lost_mid_batch_is_retried(arun_asyncio: Runner, own_server: RedisServer,
                                                own_raw: redis.Redis, core_name: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, timeout=0.15,
                                            chunk_size=500) as client:
            names = [f"r:{i}" for i in range(1500)]
            leases = (await client.acquire_many(names, 60)).acquired
            assert len(leases) == 1500
            own_server.pause()
            try:
                with pytest.raises(OutcomeUnknownError) as caught:
                    await client.release_many(leases)
            finally:
                own_server.resume()
            assert caught.value.names == names
            assert client.pending_cleanup <= 1500
            await settle(client)
            assert keys_left(own_raw, client.key_prefix) == []

    arun_asyncio(body)


def test_close_with_calls_in_flight_fails_them_cleanly(arun_asyncio: Runner, own_server: RedisServer,
                                                      core_name: str) -> None:
    """close() serves the calls in flight until its deadline (tests/test_close_serves_calls_in_flight.py):
    the server never answers, so each ends by its own deadline, which comes first, typed."""
    async def body() -> None:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, timeout=2)
        await client.query("warm-up")
        own_server.pause()
        try:
            calls = [asyncio.ensure_future(client.query(f"q{i}")) for i in range(10)]
            await asyncio.sleep(0.01)
            started = time.monotonic()
            await client.close()
            took = time.monotonic() - started
            results = await asyncio.gather(*calls, return_exceptions=True)
            assert all(type(r) is TimeoutError and "did not answer" in str(r) for r in results), results
            assert took < 2 + 0.5, f"close() took {took:.2f}s"
        finally:
            own_server.resume()

    arun_asyncio(body)


def test_unreachable_server_and_connect_timeout(arun_asyncio: Runner, core_name: str) -> None:
    async def body() -> None:
        from turbolock.redis_server import free_port

        port = free_port()
        async with AsyncLockClient(port=port, core=core_name, connect_timeout=0.5) as client:
            with pytest.raises(ConnectionError, match=f"cannot connect to 127.0.0.1:{port}"):
                await client.try_acquire("x", 10)
            assert client.pending_cleanup == 0
        # A listener that never accepts: the handshake (SELECT) cannot finish in time.
        with RedisServer() as server:
            server.pause()
            try:
                async with AsyncLockClient.from_url(server.url.replace("/0", "/1"), core=core_name,
                                                    connect_timeout=0.2) as client:
                    started = time.monotonic()
                    with pytest.raises(TimeoutError, match=r"(timed out after|within) 0\.2s"):
                        await client.query("x")
                    assert time.monotonic() - started < GENEROUS
            finally:
                server.resume()

    arun_asyncio(body)
