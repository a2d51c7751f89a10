"""Bulk Redlock on asyncio: every master gets the whole batch, the quorum is decided per name, a
name that misses it is left held nowhere; and claims (``limit=k``): exactly k free names when k
are free, never more, names held by others skipped and reported, the rest not tried."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest
import redis
from _async_redlock_workers import TTL, values
from async_helpers import Runner

from _eventually import eventually_async as eventually
from _raw import Raws
from turbolock import InstanceSummary, RedlockManyResult, RedlockStatus
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

MakeRedlock = Callable[..., AsyncRedlockClient]


def stored(raw: redis.Redis, prefix: str) -> dict[bytes, bytes]:
    """Every key under ``prefix`` on one master, with its value."""
    keys = list(raw.scan_iter(match=prefix + "*", count=1000))
    return dict(zip(keys, raw.mget(keys), strict=True)) if keys else {}


def ours(raw: redis.Redis, prefix: str) -> dict[bytes, bytes]:
    """The keys under ``prefix`` not set by the tests' "other" holder."""
    return {key: value for key, value in stored(raw, prefix).items() if value != b"other"}


def hold_elsewhere(connections: list[redis.Redis], prefix: str, names: Sequence[str]) -> None:
    for raw in connections:
        for name in names:
            raw.set(prefix + name, b"other", px=60_000)


def run_start(indices: set[int], count: int) -> int:
    """Where ``indices`` begin if they are one run of names in a row (wrapping at ``count``)."""
    starts = [i for i in indices if (i - 1) % count not in indices]
    assert len(starts) == 1, f"not one run from a start: {sorted(indices)}"
    return starts[0]


def shards(count: int) -> list[str]:
    return [f"shard:{i}" for i in range(count)]


def test_bulk_acquire_decides_the_quorum_per_name(arun: Runner, masters: list[RedisServer],
                                                  make_async_redlock: MakeRedlock, raws: Raws,
                                                  key_prefix: str) -> None:
    count = len(masters)
    quorum = count // 2 + 1
    connections = raws(masters)
    # "minority:i" is held by someone else on a minority of masters, "majority:i" on a majority.
    for i in range(50):
        for raw in connections[:count - quorum]:
            raw.set(f"{key_prefix}minority:{i}", b"other", px=60_000)
        for raw in connections[:quorum]:
            raw.set(f"{key_prefix}majority:{i}", b"other", px=60_000)
    names = [f"{kind}:{i}" for i in range(50) for kind in ("free", "minority", "majority")]

    async def body() -> None:
        async with make_async_redlock(masters, chunk_size=7) as client:  # many chunks per master
            result = await client.acquire_many(names, TTL)
            assert isinstance(result, RedlockManyResult)
            assert len(result) == len(names) and result.names == names
            for i, name in enumerate(names):
                kind = name.split(":")[0]
                if kind == "majority":
                    assert result[i] is None and result.statuses[i] is RedlockStatus.CONFLICTED
                    assert result.summary(i) == InstanceSummary(count - quorum, quorum, 0)
                else:
                    lease = result[i]
                    assert lease is not None and lease.name == name and 0 < lease.valid_for() < TTL
                    assert result.statuses[i] is RedlockStatus.ACQUIRED
                    expected = count if kind == "free" else quorum
                    assert result.summary(i) == InstanceSummary(expected, count - expected, 0)
                    held = values(connections, key_prefix + name)
                    assert held.count(lease.token) == expected, name
            assert result.counts() == {RedlockStatus.ACQUIRED: 100, RedlockStatus.CONFLICTED: 50}
            assert sorted(result.not_acquired) == sorted(n for n in names if n.startswith("majority"))  # type: ignore[type-var]
            assert result.no_quorum == [] and result.not_tried == [] and not result.all_acquired
            by_chunk = [{lease.token for lease in result.leases[i:i + 7] if lease is not None}
                        for i in range(0, len(names), 7)]
            assert all(len(tokens) <= 1 for tokens in by_chunk), "the names of a chunk share its token"
            assert len(set.union(*by_chunk)) == sum(map(len, by_chunk)), "each chunk draws a new one"
            # The conflicted names were released where they had been taken: only "other" remains.
            for i in range(50):
                assert set(values(connections, f"{key_prefix}majority:{i}")) <= {b"other", None}
            assert await client.extend_many(result.acquired, 30) == [True] * 100
            assert all(29 < lease.valid_for() < 30 for lease in result.acquired)
            assert all(29_000 < raw.pttl(f"{key_prefix}free:7") <= 30_000 for raw in connections)
            assert await client.release_many(result.acquired) == [True] * 100
            for raw in connections:
                assert ours(raw, key_prefix) == {}

    arun(body)


def test_all_or_nothing_releases_everything_when_one_name_fails(
        arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    connections = raws(three)
    for raw in connections:
        raw.set(f"{key_prefix}b", b"other", px=60_000)

    async def body() -> None:
        async with make_async_redlock(three) as client:
            result = await client.acquire_many(["a", "b", "c"], TTL, all_or_nothing=True)
            assert list(result) == [None, None, None] and not result.all_acquired
            assert result.statuses == [RedlockStatus.ACQUIRED, RedlockStatus.CONFLICTED,
                                       RedlockStatus.ACQUIRED]
            assert values(connections, f"{key_prefix}a") == [None] * 3
            assert values(connections, f"{key_prefix}c") == [None] * 3
            both = await client.acquire_many(["a", "c"], TTL, all_or_nothing=True)
            assert both.all_acquired and len(both.acquired) == 2
            assert await client.release_many(both.acquired) == [True, True]

    arun(body)


def test_bulk_release_and_extend_per_name(arun: Runner, three: list[RedisServer],
                                          make_async_redlock: MakeRedlock, raws: Raws,
                                          key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as client:
            tokens = [b"token-kept-......", b"token-stolen-....", b"token-gone-......"]
            leases = (await client.acquire_many(["kept", "stolen", "gone"], TTL, tokens=tokens)).acquired
            assert [lease.token for lease in leases] == tokens
            for raw in connections[:2]:
                raw.set(f"{key_prefix}stolen", b"thief", px=60_000)
            for raw in connections:
                raw.delete(f"{key_prefix}gone")
            # "gone" vanished everywhere (someone may have held it since): extend must not take it
            # back; keys it set again are released in the background.
            assert await client.extend_many(leases, TTL) == [True, False, False]
            assert leases[2].is_lost and leases[2].valid_for() == 0
            assert await eventually(lambda: values(connections, f"{key_prefix}gone") == [None] * 3, 3.0)
            assert await client.release_many(leases) == [True, False, False]
            assert values(connections, f"{key_prefix}stolen") == [b"thief", b"thief", None]
            assert values(connections, f"{key_prefix}kept") == [None] * 3
            assert await client.release_many([]) == [] and await client.extend_many([], TTL) == []
            empty = await client.acquire_many([], TTL)
            assert len(empty) == 0 and empty.all_acquired

    arun(body)


def test_bulk_calls_from_many_tasks_at_once(arun: Runner, three: list[RedisServer],
                                            make_async_redlock: MakeRedlock, raws: Raws,
                                            key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three, chunk_size=16) as client:
            async def batch(task: int) -> None:
                names = [f"t{task}:{i}" for i in range(40)]
                result = await client.acquire_many(names, TTL)
                assert result.all_acquired and [lease.name for lease in result.acquired] == names
                for lease in result.acquired[::7]:
                    assert values(connections, key_prefix + str(lease.name)) == [lease.token] * 3
                assert await client.extend_many(result.acquired, TTL) == [True] * 40
                assert await client.release_many(result.acquired) == [True] * 40

            await asyncio.gather(*(batch(task) for task in range(8)))
            assert all(stored(raw, key_prefix) == {} for raw in connections)

    arun(body)


# -- claims: acquire_many(names, ttl, limit=k) ------------------------------------------------------


@pytest.fixture(params=[1000, 3], ids=["chunk1000", "chunk3"])
def chunk_size(request: pytest.FixtureRequest) -> int:
    size: int = request.param
    return size


def test_a_claim_takes_exactly_k_free_names_on_every_master(
        arun: Runner, masters: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str, chunk_size: int) -> None:
    count = len(masters)
    connections = raws(masters)
    names = shards(40)

    async def body() -> None:
        async with make_async_redlock(masters, chunk_size=chunk_size) as client:
            result = await client.acquire_many(names, TTL, limit=8)
            assert isinstance(result, RedlockManyResult)
            assert len(result) == 40 and result.names == names
            taken = {i for i, lease in enumerate(result) if lease is not None}
            assert len(taken) == 8 and len(result.acquired) == 8
            assert result.not_acquired == [] and result.no_quorum == []
            assert result.not_tried == [names[i] for i in range(40) if i not in taken], \
                "the rest, in input order"
            assert result.counts() == {RedlockStatus.ACQUIRED: 8, RedlockStatus.NOT_TRIED: 32}
            run_start(taken, 40)
            for i in range(40):
                expected = InstanceSummary(count, 0, 0) if i in taken else InstanceSummary(0, 0, 0)
                assert result.summary(i) == expected
            for lease in result.acquired:
                assert values(connections, key_prefix + str(lease.name)) == [lease.token] * count, "one token"
                assert 0 < lease.valid_for() <= TTL and lease.status is RedlockStatus.ACQUIRED
            assert all(len(stored(raw, key_prefix)) == 8 for raw in connections)
            assert await client.release_many(result.acquired) == [True] * 8
            assert all(stored(raw, key_prefix) == {} for raw in connections)

    arun(body)


def test_a_claim_skips_names_held_by_others(arun: Runner, masters: list[RedisServer],
                                            make_async_redlock: MakeRedlock, raws: Raws, key_prefix: str,
                                            chunk_size: int) -> None:
    count = len(masters)
    quorum = count // 2 + 1
    connections = raws(masters)
    names = shards(48)
    others = {i for i in range(48) if i % 3 != 0}  # 32 held on a majority of masters, 16 free
    hold_elsewhere(connections[:quorum], key_prefix, [names[i] for i in others])

    async def body() -> None:
        async with make_async_redlock(masters, chunk_size=chunk_size) as client:
            result = await client.acquire_many(names, TTL, limit=6)
            taken = {i for i, lease in enumerate(result) if lease is not None}
            assert len(taken) == 6 and not taken & others
            refused = {names.index(str(name)) for name in result.not_acquired}
            assert refused <= others
            assert all(result.statuses[i] is RedlockStatus.CONFLICTED for i in refused)
            assert all(result.summary(i) == InstanceSummary(count - quorum, quorum, 0) for i in refused)
            untried = {names.index(str(name)) for name in result.not_tried}
            assert taken | refused | untried == set(range(48))
            assert len(taken) + len(refused) + len(untried) == 48 and result.no_quorum == []
            start = run_start(taken | refused, 48)
            assert (start + len(taken | refused) - 1) % 48 in taken, "it stopped with the 6th free name"
            for i in others:  # untouched where held, and nothing of ours left on the other masters
                assert values(connections, key_prefix + names[i]) == \
                    [b"other"] * quorum + [None] * (count - quorum)
            assert all(len(ours(raw, key_prefix)) == 6 for raw in connections)
            assert await client.release_many(result.acquired) == [True] * 6

    arun(body)


def test_a_claim_never_takes_more_than_k(arun: Runner, masters: list[RedisServer],
                                         make_async_redlock: MakeRedlock, raws: Raws,
                                         key_prefix: str) -> None:
    count = len(masters)
    quorum = count // 2 + 1
    connections = raws(masters)
    names = shards(30)
    hold_elsewhere(connections[:quorum], key_prefix, names[::2])

    async def body() -> None:
        for size in (1, 2):
            async with make_async_redlock(masters, chunk_size=size) as client:
                for k in (1, 3, 7):
                    result = await client.acquire_many(names, TTL, limit=k)
                    case = f"chunk_size {size}, limit {k}"
                    assert len(result.acquired) == k, case
                    assert all(len(ours(raw, key_prefix)) == k for raw in connections), case
                    assert all(names.index(str(lease.name)) % 2 == 1 for lease in result.acquired), case
                    assert await client.release_many(result.acquired) == [True] * k
        # A limit above what is free takes every free name, and says which ones others hold.
        async with make_async_redlock(masters) as client:
            result = await client.acquire_many(names, TTL, limit=1000)
            assert [lease is not None for lease in result] == [i % 2 == 1 for i in range(30)]
            assert result.not_acquired == names[::2] and result.not_tried == []
            again = await client.acquire_many(names, TTL, limit=5)
            assert again.acquired == [] and again.not_acquired == names and again.not_tried == []
            assert await client.release_many(result.acquired) == [True] * 15
        for raw in connections[:quorum]:
            assert set(stored(raw, key_prefix).values()) == {b"other"} and len(stored(raw, key_prefix)) == 15

    arun(body)


def test_tasks_claiming_from_one_list_share_it_without_overlap(
        arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    connections = raws(three)
    names = shards(24)

    async def body() -> None:
        clients = [make_async_redlock(three, chunk_size=2) for _ in range(4)]
        try:
            async def worker(client: AsyncRedlockClient) -> dict[str, bytes]:
                taken: dict[str, bytes] = {}
                for _ in range(30):
                    if len(taken) == 6:
                        break
                    result = await client.acquire_many(names, 30, limit=6 - len(taken))
                    taken.update((str(lease.name), lease.token) for lease in result.acquired)
                    await asyncio.sleep(0.005)
                return taken

            shares = await asyncio.gather(*(worker(client) for client in clients))
            assert [len(share) for share in shares] == [6] * 4, "each worker got its 6 shards"
            assert sorted(name for share in shares for name in share) == sorted(names), "no shard twice"
            for share in shares:
                for name, token in share.items():
                    held = values(connections, key_prefix + name)
                    assert held.count(token) >= 2 and set(held) <= {token, None}, f"{name}: its owner's only"
        finally:
            for client in clients:
                await client.close()  # nothing auto-renewed: the locks stay until their ttl
            for raw in connections:
                keys = list(stored(raw, key_prefix))
                if keys:
                    raw.delete(*keys)

    arun(body)
