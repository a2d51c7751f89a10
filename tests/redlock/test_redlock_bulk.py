"""Bulk Redlock: every master gets the whole batch, the quorum is decided per name, and a name
that misses it is left held nowhere."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from _raw import Raws
from turbolock import InstanceSummary, QuorumError, RedlockClient, RedlockStatus
from turbolock.redis_server import RedisServer

from ._helpers import TTL, values, wait_for

MakeRedlock = Callable[..., RedlockClient]
OwnMasters = Callable[[int], list[RedisServer]]


def _keys_on(raw: redis.Redis, prefix: str) -> set[bytes]:
    return set(raw.scan_iter(match=prefix + "*", count=1000))


def test_bulk_acquire_decides_the_quorum_per_name(masters: list[RedisServer], make_redlock: MakeRedlock,
                                                  raws: Raws, key_prefix: str) -> None:
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
    client = make_redlock(masters, chunk_size=7)  # many chunks, two in flight per master
    result = client.acquire_many(names, TTL)
    assert len(result) == len(names) and result.names == names
    for i, name in enumerate(names):
        kind = name.split(":")[0]
        if kind == "majority":
            assert result[i] is None and result.statuses[i] is RedlockStatus.CONFLICTED
            assert result.summary(i) == InstanceSummary(count - quorum, quorum, 0)
        else:
            lease = result[i]
            assert lease is not None and lease.name == name and lease.valid_for() > 0
            assert result.statuses[i] is RedlockStatus.ACQUIRED
            expected = count if kind == "free" else quorum
            assert result.summary(i) == InstanceSummary(expected, count - expected, 0)
    assert result.counts() == {RedlockStatus.ACQUIRED: 100, RedlockStatus.CONFLICTED: 50}
    assert sorted(result.not_acquired) == sorted(n for n in names if n.startswith("majority"))  # type: ignore[type-var]
    # The conflicted names were released where they had been taken: only "other" remains.
    for i in range(50):
        assert set(values(connections, f"{key_prefix}majority:{i}")) <= {b"other", None}
    assert client.extend_many(result.acquired, 30) == [True] * 100
    assert all(lease.valid_for() > 29 for lease in result.acquired)
    assert client.release_many(result.acquired) == [True] * 100
    for raw in connections:
        assert all(raw.get(key) == b"other" for key in _keys_on(raw, key_prefix))


def test_all_or_nothing_releases_everything_when_one_name_fails(
        three: list[RedisServer], make_redlock: MakeRedlock, raws: Raws, key_prefix: str) -> None:
    connections = raws(three)
    for raw in connections:
        raw.set(f"{key_prefix}b", b"other", px=60_000)
    client = make_redlock(three)
    result = client.acquire_many(["a", "b", "c"], TTL, all_or_nothing=True)
    assert list(result) == [None, None, None] and not result.all_acquired
    assert result.statuses == [RedlockStatus.ACQUIRED, RedlockStatus.CONFLICTED, RedlockStatus.ACQUIRED]
    assert result.not_acquired == ["b"]  # as on one server: the names given back are not "held by others"
    assert values(connections, f"{key_prefix}a") == [None] * 3
    assert values(connections, f"{key_prefix}c") == [None] * 3
    assert client.acquire_many(["a", "c"], TTL, all_or_nothing=True).all_acquired


def test_bulk_release_and_extend_per_name(three: list[RedisServer], make_redlock: MakeRedlock, raws: Raws,
                                          key_prefix: str) -> None:
    client = make_redlock(three)
    leases = client.acquire_many(["kept", "stolen", "gone"], TTL).acquired
    connections = raws(three)
    for raw in connections[:2]:
        raw.set(f"{key_prefix}stolen", b"thief", px=60_000)
    for raw in connections:
        raw.delete(f"{key_prefix}gone")
    # "gone" vanished everywhere (deleted behind its back, so someone may have held it since):
    # extend must not take it back; the keys it set again are released in the background.
    assert client.extend_many(leases, TTL) == [True, False, False]
    assert leases[2].is_lost and leases[2].valid_for() == 0
    assert wait_for(lambda: values(connections, f"{key_prefix}gone") == [None] * 3, 3.0)
    assert client.release_many(leases) == [True, False, False]
    assert values(connections, f"{key_prefix}stolen") == [b"thief", b"thief", None]
    assert client.release_many([]) == []


def test_bulk_with_one_master_down_and_then_a_majority(own_masters: OwnMasters, make_redlock: MakeRedlock,
                                                       raws: Raws, key_prefix: str) -> None:
    servers = own_masters(3)
    client = make_redlock(servers, chunk_size=10)
    names = [f"shard:{i}" for i in range(40)]
    servers[0].stop(remove_directory=False)
    result = client.acquire_many(names, TTL)
    assert result.all_acquired and {result.summary(i) for i in range(40)} == {InstanceSummary(2, 0, 1)}
    servers[1].stop(remove_directory=False)
    with pytest.raises(QuorumError) as info:  # released on one master only: unconfirmed
        client.release_many(result.acquired)
    assert sorted(info.value.names) == sorted(names)  # type: ignore[type-var]
    assert _keys_on(raws(servers[2:])[0], key_prefix) == set()
    again = client.acquire_many(names, TTL)
    assert again.no_quorum == names and again.acquired == []
    assert again.statuses == [RedlockStatus.NO_QUORUM] * 40
    assert _keys_on(raws(servers[2:])[0], key_prefix) == set()  # nothing left on the live one


def test_bulk_after_a_restart_reloads_the_scripts(own_masters: OwnMasters, make_redlock: MakeRedlock,
                                                  raws: Raws, key_prefix: str) -> None:
    servers = own_masters(3)
    client = make_redlock(servers, chunk_size=16)
    names = [f"n:{i}" for i in range(100)]
    leases = client.acquire_many(names, TTL).acquired
    assert len(leases) == 100
    servers[1].restart()
    assert client.extend_many(leases, TTL) == [True] * 100  # NOSCRIPT, load, retry; keys set again
    assert len(_keys_on(raws(servers)[1], key_prefix)) == 100
    servers[2].restart()
    assert client.release_many(leases) == [True] * 100
    for raw in raws(servers):
        assert _keys_on(raw, key_prefix) == set()


def test_bulk_with_a_stopped_master_is_bounded_and_cleans_up(
        own_masters: OwnMasters, make_redlock: MakeRedlock, raws: Raws, key_prefix: str) -> None:
    servers = own_masters(3)
    client = make_redlock(servers, chunk_size=50)
    names = [f"job:{i}" for i in range(500)]
    warm = client.acquire_many(names[:10], TTL)
    assert client.release_many(warm.acquired) == [True] * 10
    servers[1].pause()
    try:
        started = time.monotonic()
        result = client.acquire_many(names, TTL)
        elapsed = time.monotonic() - started
        # One chunk timeout (a tenth of the ttl) for the stopped master, then it is left out.
        assert elapsed < TTL / 10 + 1.5, f"bulk acquire took {elapsed:.3f}s with one master stopped"
        assert result.all_acquired
        assert {result.summary(i) for i in range(len(names))} == {InstanceSummary(2, 0, 1)}
    finally:
        servers[1].resume()
    stopped = raws(servers)[1]
    stopped.ping()  # it has run what was queued for it: the first chunks, with our tokens
    tokens = {lease.key: lease.token for lease in result.acquired}
    ran = _keys_on(stopped, key_prefix)
    assert ran and all(stopped.get(key) == tokens[key[len(key_prefix):]] for key in ran)
    assert client.release_many(result.acquired) == [True] * len(names)
    assert all(not _keys_on(raw, key_prefix) for raw in raws(servers))
