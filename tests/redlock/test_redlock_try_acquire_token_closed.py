"""RedlockClient.try_acquire (both fronts), its own hot path, and acquire_many: a try with a
token waits out a release with that token on its way (it took the lock, which the release then
deleted), and a closed client raises ClientClosedError and takes no lock, even over masters
given as LockClients that stay open (it raised QuorumError, or took the locks) (found by
review)."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
import redis

from turbolock import ClientClosedError, LockClient, RedlockClient
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer


def _outcome(fn) -> object:
    try:
        return fn()
    except BaseException as exc:
        return exc


def test_try_acquire_on_a_closed_redlock_client_raises_client_closed(
        three: list[RedisServer], core_name: str, key_prefix: str) -> None:
    client = RedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
    assert client.query("free") is not None
    client.close()
    result = _outcome(lambda: client.try_acquire("free", 5))
    assert isinstance(result, ClientClosedError), result


@pytest.mark.parametrize("call", ["try_acquire", "acquire_many"])
def test_a_closed_redlock_client_over_open_lockclients_takes_no_lock(
        three: list[RedisServer], core_name: str, key_prefix: str, call: str) -> None:
    masters = [LockClient.from_url(s.url, core=core_name, key_prefix=key_prefix) for s in three]
    raws = [redis.Redis(host=s.host, port=s.port) for s in three]
    try:
        client = RedlockClient(masters)
        assert client.query("free") is not None
        client.close()
        if call == "try_acquire":
            result = _outcome(lambda: client.try_acquire("after-close", 30))
        else:
            result = _outcome(lambda: client.acquire_many(["after-close", "other"], 30))
        held = [r.get((key_prefix + "after-close").encode()) for r in raws]
        assert isinstance(result, ClientClosedError) and held == [None] * 3, (result, held)
    finally:
        for m in masters:
            m.close()
        for r in raws:
            r.close()


def test_async_try_acquire_on_a_closed_redlock_client_raises_client_closed(
        three: list[RedisServer], core_name: str, key_prefix: str) -> None:
    async def main() -> object:
        client = AsyncRedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
        assert await client.query("free") is not None
        await client.close()
        try:
            return await client.try_acquire("free", 5)
        except BaseException as exc:
            return exc

    result = asyncio.run(main())
    assert isinstance(result, ClientClosedError), result


def _on_its_way(client, key: bytes, token: bytes) -> None:
    """What a master's cleaner does when it sends an owed release: the entry taken, on its way
    (the book's keys are the names, unprefixed)."""
    key = key[len(client.key_prefix):]
    for m in client.masters:
        m._cleanup.remember(key, token, time.monotonic() + 30)
        assert m._cleanup.claim(key, token) is not None
        assert m._cleanup.on_its_way(key, token)


def _lands(client, raws, key: bytes, token: bytes) -> None:
    """The release on its way arrives (compare and delete with the token) and is settled."""
    for r in raws:
        if r.get(key) == token:
            r.delete(key)
    for m in client.masters:
        m._cleanup.settle([(key[len(client.key_prefix):], token, time.monotonic() + 30)], [1])


def test_try_acquire_with_a_token_waits_out_a_release_on_its_way(
        three: list[RedisServer], core_name: str, key_prefix: str) -> None:
    client = RedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
    raws = [redis.Redis(host=s.host, port=s.port) for s in three]
    key = (key_prefix + "job").encode()
    token = os.urandom(16)
    try:
        assert client.query("warm") is not None
        _on_its_way(client, key, token)
        control = client.acquire("job", 20, token=token, blocking=False)
        assert control.lease is None, "control: the blocking-acquire path waits it out"
        lease = client.try_acquire("job", 20, token=token)
        _lands(client, raws, key, token)
        left = client.check(lease) if lease is not None else None
        assert lease is None or left is not None, (
            f"try_acquire with token took the lock while a release with that token was on its way; "
            f"the release then deleted it and the lease is held nowhere (check: {left!r})")
    finally:
        client.close()
        for r in raws:
            r.close()


def test_async_try_acquire_with_a_token_waits_out_a_release_on_its_way(
        three: list[RedisServer], core_name: str, key_prefix: str) -> None:
    raws = [redis.Redis(host=s.host, port=s.port) for s in three]
    key = (key_prefix + "job").encode()
    token = os.urandom(16)

    async def main() -> tuple[object, object, object]:
        client = AsyncRedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
        try:
            assert await client.query("warm") is not None
            _on_its_way(client, key, token)
            control = await client.acquire("job", 20, token=token, blocking=False)
            lease = await client.try_acquire("job", 20, token=token)
            _lands(client, raws, key, token)
            left = await client.check(lease) if lease is not None else None
            return control.lease, lease, left
        finally:
            await client.close()

    try:
        control, lease, left = asyncio.run(main())
        assert control is None, "control: the acquire path waits it out"
        assert lease is None or left is not None, (
            f"async try_acquire with token took the lock while a release with that token was on its "
            f"way; the release then deleted it (check: {left!r})")
    finally:
        for r in raws:
            r.close()
