"""The bulk API on asyncio: a result per name in input order, chunked and pipelined like the
blocking client's, with the same result types."""

from __future__ import annotations

import os

import redis
from async_helpers import NewClient, Runner, keys_left

from turbolock import AcquireManyResult, LockInfo
from turbolock._aio.tokens import TokenSource


def test_acquire_many_reports_each_name_in_order(arun: Runner, new_client: NewClient,
                                                raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(chunk_size=7) as client:
            names = [f"n{i}" for i in range(50)]
            taken = [f"n{i}" for i in range(0, 50, 5)]
            for name in taken:
                raw.set(client.key_prefix + name.encode(), b"other", px=60000)
            result = await client.acquire_many(names, 30)
            assert isinstance(result, AcquireManyResult) and len(result) == 50
            assert result.not_acquired == taken and not result.all_acquired
            for name, lease in zip(names, result, strict=True):
                assert (lease is None) == (name in taken)
                if lease is not None:
                    assert lease.name == name and raw.get(client.key_prefix + name.encode()) == lease.token
            tokens = [None if lease is None else lease.token for lease in result]
            assert len(set(tokens) - {None}) == 8, "one fresh token per chunk of 7"
            assert all(len({t for t in tokens[i:i + 7] if t is not None}) == 1 for i in range(0, 50, 7))
            infos = await client.query_many([*names, "free"])
            assert all(info.held for info in infos[:50]) and infos[50] == LockInfo(False, None)
            assert await client.extend_many(result.acquired, 60) == [True] * 40
            assert all(lease.ttl_ms == 60000 for lease in result.acquired)
            raw.delete(client.key_prefix + b"n1")
            flags = await client.release_many(result.acquired)
            assert flags == [lease.name != "n1" for lease in result.acquired]
            assert sorted(keys_left(raw, client.key_prefix)) == sorted(
                client.key_prefix + name.encode() for name in taken)

    arun(body)


def test_all_or_nothing_and_caller_tokens_and_mixed_names(arun: Runner, new_client: NewClient,
                                                          raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client() as client:
            raw.set(client.key_prefix + b"busy", b"other", px=60000)
            result = await client.acquire_many(["a", "busy", "c"], 30, all_or_nothing=True)
            assert list(result) == [None, None, None] and result.not_acquired == ["busy"]
            assert keys_left(raw, client.key_prefix) == [client.key_prefix + b"busy"]
            tokens = [bytes([i]) * 16 for i in range(1, 4)]
            result = await client.acquire_many(["x", b"y", "\u00e9"], 30, tokens=tokens)
            assert result.all_acquired
            assert [raw.get(client.key_prefix + k) for k in (b"x", b"y", "\u00e9".encode())] == tokens
            assert await client.release_many(result.acquired) == [True] * 3
            assert list(await client.acquire_many([], 5)) == []
            assert await client.release_many([]) == [] and await client.query_many([]) == []

    arun(body)


def test_bulk_calls_survive_script_flush(arun: Runner, new_client: NewClient, raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(chunk_size=300) as client:
            result = await client.acquire_many([f"f{i}" for i in range(1000)], 30)
            raw.script_flush()
            assert await client.extend_many(result.acquired, 40) == [True] * 1000
            raw.script_flush()
            assert await client.release_many(result.acquired) == [True] * 1000
            assert keys_left(raw, client.key_prefix) == []

    arun(body)


def test_forked_child_never_reuses_the_parents_tokens() -> None:
    source = TokenSource()
    source.take()  # the parent has a batch drawn
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write_end, source.take())
        os._exit(0)
    os.close(write_end)
    child_token = os.read(read_end, 64)
    os.close(read_end)
    os.waitpid(pid, 0)
    parent_tokens = {source.take() for _ in range(255)}
    assert len(child_token) == 16 and child_token not in parent_tokens
