"""The bulk API: a result per name, in input order, on a real server, chunked and pipelined."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator

import pytest
import redis

from turbolock import LockClient, ResponseError
from turbolock.redis_server import RedisServer


@pytest.fixture(params=[1000, 7], ids=["chunk1000", "chunk7"])
def bulk_client(request: pytest.FixtureRequest, redis_server: RedisServer, core_name: str,
                key_prefix: str) -> Iterator[LockClient]:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix,
                             chunk_size=request.param) as client:
        yield client


def test_acquire_many_reports_each_name_in_order(bulk_client: LockClient, raw: redis.Redis) -> None:
    names = [f"shard:{i}" for i in range(3000)]
    held_elsewhere = set(random.Random(1).sample(range(3000), 300))
    for i in held_elsewhere:
        raw.set(bulk_client.key_prefix + names[i].encode(), b"other", px=30000)
    result = bulk_client.acquire_many(names, 30)
    assert len(result) == 3000
    for i, lease in enumerate(result):
        if i in held_elsewhere:
            assert lease is None
        else:
            assert lease is not None and lease.name == names[i]
    assert set(result.not_acquired) == {names[i] for i in held_elsewhere}
    assert len(result.acquired) == 2700 and not result.all_acquired
    stored = raw.mget([bulk_client.key_prefix + lease.key for lease in result.acquired[:50]])
    assert stored == [lease.token for lease in result.acquired[:50]]


def test_release_many_touches_only_our_keys(bulk_client: LockClient, raw: redis.Redis) -> None:
    names = [f"r{i}" for i in range(2000)]
    leases = bulk_client.acquire_many(names, 30).acquired
    assert len(leases) == 2000
    stolen = set(range(0, 2000, 9))
    for i in stolen:
        raw.set(bulk_client.key_prefix + names[i].encode(), b"thief", px=30000)
    released = bulk_client.release_many(leases)
    assert released == [i not in stolen for i in range(2000)]
    assert raw.exists(*[bulk_client.key_prefix + names[i].encode() for i in stolen]) == len(stolen)
    assert [info.held for info in bulk_client.query_many(names)] == [i in stolen for i in range(2000)]


def test_extend_many_and_query_many(bulk_client: LockClient, raw: redis.Redis) -> None:
    names = [f"e{i}" for i in range(1500)]
    leases = bulk_client.acquire_many(names, 2).acquired
    gone = set(range(5, 1500, 11))
    raw.delete(*[bulk_client.key_prefix + names[i].encode() for i in gone])
    extended = bulk_client.extend_many(leases, 60)
    assert extended == [i not in gone for i in range(1500)]
    infos = bulk_client.query_many(names)
    for i, info in enumerate(infos):
        if i in gone:
            assert info == (False, None)
        else:
            assert info.held and info.remaining is not None and 55 < info.remaining <= 60
    assert all(leases[i].ttl_ms == 60000 for i in range(1500) if i not in gone)
    assert all(leases[i].ttl_ms == 2000 for i in gone)


def test_all_or_nothing_releases_what_it_took(bulk_client: LockClient, raw: redis.Redis) -> None:
    names = [f"a{i}" for i in range(500)]
    raw.set(bulk_client.key_prefix + b"a250", b"other", px=30000)
    result = bulk_client.acquire_many(names, 30, all_or_nothing=True)
    assert list(result) == [None] * 500
    assert result.not_acquired == ["a250"] and not result.all_acquired
    assert raw.exists(*[bulk_client.key_prefix + n.encode() for n in names]) == 1
    raw.delete(bulk_client.key_prefix + b"a250")
    result = bulk_client.acquire_many(names, 30, all_or_nothing=True)
    assert result.all_acquired and len(result.acquired) == 500


def test_bulk_release_survives_script_flush(bulk_client: LockClient, raw: redis.Redis) -> None:
    names = [f"f{i}" for i in range(1200)]
    leases = bulk_client.acquire_many(names, 30).acquired
    raw.script_flush()
    assert bulk_client.release_many(leases) == [True] * 1200
    assert raw.exists(*[bulk_client.key_prefix + n.encode() for n in names]) == 0
    leases = bulk_client.acquire_many(names, 30).acquired
    raw.script_flush()
    assert bulk_client.extend_many(leases, 40) == [True] * 1200


def test_bytes_and_str_names_mix(bulk_client: LockClient) -> None:
    names: list[str | bytes] = ["plain", b"\xff\x00bin", "\u00fcnicode"]
    result = bulk_client.acquire_many(names, 5)
    assert [lease.name for lease in result.acquired] == names
    assert [info.held for info in bulk_client.query_many(names)] == [True, True, True]
    assert bulk_client.release_many(result.acquired) == [True, True, True]


def test_caller_tokens_are_stored(bulk_client: LockClient, raw: redis.Redis) -> None:
    tokens = [b"worker-7:token:%04d" % i for i in range(20)]
    result = bulk_client.acquire_many([f"t{i}" for i in range(20)], 5, tokens=tokens)
    assert [lease.token for lease in result.acquired] == tokens
    assert raw.mget([bulk_client.key_prefix + b"t%d" % i for i in range(20)]) == tokens


def test_one_failing_key_does_not_stop_a_bulk_release(bulk_client: LockClient, raw: redis.Redis) -> None:
    # A lock key replaced by a hash behind the client's back: its release fails (WRONGTYPE) and
    # the call raises it, but every other lock of the call, before and after it, is released.
    names = [f"w{i}" for i in range(2500)]
    leases = bulk_client.acquire_many(names, 30).acquired
    broken = bulk_client.key_prefix + b"w1500"
    raw.delete(broken)
    raw.hset(broken, "field", "value")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        bulk_client.release_many(leases)
    assert raw.exists(*[bulk_client.key_prefix + n.encode() for n in names]) == 1
    raw.delete(broken)


def test_extend_many_settles_every_call_before_and_after_one_that_failed(
        bulk_client: LockClient, raw: redis.Redis) -> None:
    # The calls before the failed one are settled as their replies arrive, the rest at the end.
    names = [f"x{i}" for i in range(3500)]
    leases = bulk_client.acquire_many(names, 2).acquired
    raw.delete(bulk_client.key_prefix + b"x2500")
    assert bulk_client.extend_many(leases, 60) == [i != 2500 for i in range(3500)]
    assert leases[2500].is_lost and leases[2500].valid_for() == 0
    kept = [lease for i, lease in enumerate(leases) if i != 2500]
    assert all(lease.ttl_ms == 60_000 and 55 < lease.valid_for() <= 60 for lease in kept)
    left = [raw.pttl(bulk_client.key_prefix + names[i].encode()) for i in (0, 999, 2499, 2501, 3499)]
    assert min(left) > 55_000


@pytest.mark.parametrize("count", [10, 2500])
def test_bulk_calls_take_any_sequence_of_leases(bulk_client: LockClient, count: int) -> None:
    leases = bulk_client.acquire_many([f"d:{i}" for i in range(count)], 5).acquired
    assert bulk_client.release_many(deque(leases[:1])) == [True]
    rest = deque(leases[1:])
    assert bulk_client.extend_many(rest, 60) == [True] * (count - 1)
    assert all(lease.ttl_ms == 60_000 and lease.valid_for() > 55 for lease in rest), "extends not settled"
    assert bulk_client.release_many(rest) == [True] * (count - 1)
