"""Claiming at most k free locks out of many names: exactly k when k are free, never more, names
held by others skipped and reported, workers spread over the input, and nothing left held when
a claim fails part-way. Real servers, both cores."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import redis

from scenarios._harness import CTX, run_workers
from turbolock import (
    AcquireOutcomeUnknownError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockClient,
    ResponseError,
)
from turbolock._flows.claim import CLAIM, ClaimPlan, ClaimResult
from turbolock._wire import core as _core
from turbolock.redis_server import RedisServer


def claim(client: LockClient, names: Sequence[Any], ttl: Any, limit: Any, **kwargs: Any) -> ClaimResult:
    """The call under test."""
    result = client.acquire_many(names, ttl, limit=limit, **kwargs)
    assert isinstance(result, ClaimResult)
    return result


def shards(count: int) -> list[str]:
    return [f"shard:{i}" for i in range(count)]


def held_keys(raw: redis.Redis, prefix: bytes) -> list[bytes]:
    return list(raw.scan_iter(match=prefix + b"*", count=1000))


def eventually_no_keys(client: LockClient, raw: redis.Redis, within: float = 10.0) -> None:
    """Maybe-held locks are released in the background: wait for it, within a few seconds."""
    deadline = time.monotonic() + within
    while left := held_keys(raw, client.key_prefix):
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(left)} keys still held {within:g}s later: {sorted(left)[:5]}")
        client.query("poll")
        time.sleep(0.05)


def run_start(indices: set[int], count: int) -> int:
    """Where ``indices`` begin if they are one run of names in a row (wrapping at ``count``)."""
    starts = [i for i in indices if (i - 1) % count not in indices]
    assert len(starts) == 1, f"not one run from a start: {sorted(indices)}"
    return starts[0]


class BeforeCall:
    """The client's executor, running ``action`` right before its ``n``-th ``many`` call: a fault
    between two chunks of one claim, on the real server. Also counts the calls (round trips)."""

    def __init__(self, inner: Any, n: int = 0, action: Callable[[], object] = lambda: None) -> None:
        self.inner = inner
        self.n = n
        self.action = action
        self.calls = 0

    def many(self, *args: Any, **kwargs: Any) -> list[object]:
        self.calls += 1
        if self.calls == self.n:
            self.action()
        result: list[object] = self.inner.many(*args, **kwargs)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def hook(client: LockClient, n: int = 0, action: Callable[[], object] = lambda: None) -> BeforeCall:
    hooked = BeforeCall(client._exec, n, action)
    client._exec = hooked  # type: ignore[assignment]
    return hooked


@pytest.fixture(params=[1000, 8], ids=["chunk1000", "chunk8"])
def claimer(request: pytest.FixtureRequest, redis_server: RedisServer, core_name: str,
            key_prefix: str) -> Iterator[LockClient]:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix,
                             chunk_size=request.param) as client:
        yield client


def test_takes_exactly_k_of_free_names_from_one_random_start(claimer: LockClient, raw: redis.Redis) -> None:
    names = shards(64)
    result = claim(claimer, names, 30, 16)
    taken = [i for i, lease in enumerate(result) if lease is not None]
    assert len(result) == 64 and len(taken) == 16
    assert result.not_acquired == []
    assert result.not_tried == [names[i] for i in range(64) if i not in taken]
    run_start(set(taken), 64)
    for lease in result.acquired:
        assert raw.get(claimer.key_prefix + lease.key) == lease.token
        assert 29 < lease.valid_for() <= 30
    assert len(held_keys(raw, claimer.key_prefix)) == 16
    assert all(claimer.release_many(result.acquired))


def test_round_trips_one_per_chunk(redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    for chunk_size, expected in ((1000, 1), (8, 2), (5, 4)):
        with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix,
                                 chunk_size=chunk_size) as client:
            counter = hook(client)
            result = claim(client, shards(64), 30, 16)
            assert len(result.acquired) == 16
            assert counter.calls == expected, f"chunk_size {chunk_size}"
            client.release_many(result.acquired)


def test_chunks_grow_when_most_names_are_held(redis_server: RedisServer, core_name: str, key_prefix: str,
                                              raw: redis.Redis) -> None:
    names = shards(1000)
    for i in range(1000):
        if i % 10:
            raw.set(key_prefix + names[i], b"other", px=30000)
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        counter = hook(client)
        result = claim(client, names, 30, 50)
        assert len(result.acquired) == 50
        assert all(names.index(lease.name) % 10 == 0 for lease in result.acquired)
        assert counter.calls <= 3, "one name in ten free: the second chunk is sized for it"
        client.release_many(result.acquired)


def test_names_held_by_others_are_skipped_and_reported(claimer: LockClient, raw: redis.Redis) -> None:
    names = shards(64)
    others = {i for i in range(64) if i % 3 != 0}  # 42 held elsewhere, 22 free
    for i in others:
        raw.set(claimer.key_prefix + names[i].encode(), b"other", px=30000)
    result = claim(claimer, names, 30, 16)
    taken = {i for i, lease in enumerate(result) if lease is not None}
    assert len(taken) == 16 and not taken & others
    assert set(result.not_acquired) <= {names[i] for i in others}
    assert result.not_acquired == sorted(result.not_acquired, key=names.index), "in input order"
    tried = taken | {names.index(name) for name in result.not_acquired}
    assert {names.index(name) for name in result.not_tried} == set(range(64)) - tried
    assert len(tried) + len(result.not_tried) == 64
    assert all(raw.get(claimer.key_prefix + names[i].encode()) == b"other" for i in others)
    start = run_start(tried, 64)
    assert (start + len(tried) - 1) % 64 in taken, "it stopped right after the 16th free name"
    claimer.release_many(result.acquired)


def test_never_takes_more_than_k(claimer: LockClient, raw: redis.Redis) -> None:
    names = shards(200)
    for i in range(0, 200, 2):
        raw.set(claimer.key_prefix + names[i].encode(), b"other", px=30000)
    for k in (1, 7, 8, 9, 50):
        result = claim(claimer, names, 30, k)
        assert len(result.acquired) == k
        assert len(held_keys(raw, claimer.key_prefix)) == 100 + k, f"limit {k}"
        assert all(claimer.release_many(result.acquired))


def test_a_limit_above_the_free_names_takes_all_of_them(claimer: LockClient, raw: redis.Redis) -> None:
    names = shards(100)
    others = set(range(0, 100, 4))
    for i in others:
        raw.set(claimer.key_prefix + names[i].encode(), b"other", px=30000)
    result = claim(claimer, names, 30, 1000)
    assert [lease is not None for lease in result] == [i not in others for i in range(100)]
    assert result.not_acquired == [names[i] for i in sorted(others)]
    assert result.not_tried == []
    again = claim(claimer, names, 30, 5)
    assert again.acquired == [] and len(again.not_acquired) == 100, "nothing free is left"
    claimer.release_many(result.acquired)


def test_starts_spread_over_the_input(claimer: LockClient) -> None:
    names = shards(64)
    first = set()
    for _ in range(30):
        result = claim(claimer, names, 30, 1)
        first.update(lease.name for lease in result.acquired)
        claimer.release_many(result.acquired)
    assert len(first) >= 8, f"30 claims of one name out of 64 started at only {sorted(first)}"


def test_supplied_tokens_are_used(claimer: LockClient, raw: redis.Redis) -> None:
    names = shards(20)
    tokens = [b"token-%02d-........" % i for i in range(20)]
    result = claim(claimer, names, 30, 20, tokens=tokens)
    assert [raw.get(claimer.key_prefix + name.encode()) for name in names] == tokens
    assert [lease.token for lease in result.acquired] == tokens
    claimer.release_many(result.acquired)


def test_empty_names_send_nothing(claimer: LockClient) -> None:
    counter = hook(claimer)
    result = claim(claimer, [], 30, 3)
    assert list(result) == [] and result.not_tried == [] and counter.calls == 0


def test_script_is_loaded_again_after_script_flush(claimer: LockClient, raw: redis.Redis) -> None:
    names = shards(40)
    first = claim(claimer, names, 30, 3)
    claimer.release_many(first.acquired)
    raw.script_flush()
    result = claim(claimer, names, 30, 12)
    assert len(result.acquired) == 12
    assert len(held_keys(raw, claimer.key_prefix)) == 12
    claimer.release_many(result.acquired)


BAD_ARGUMENTS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"limit": 0}, InvalidArgumentError, "limit"),
    ({"limit": -3}, InvalidArgumentError, "limit"),
    ({"limit": 2.0}, InvalidArgumentTypeError, "limit"),
    ({"limit": "2"}, InvalidArgumentTypeError, "limit"),
    ({"limit": True}, InvalidArgumentTypeError, "limit"),
    ({"names": ["a", "b", "a"]}, InvalidArgumentError, "names"),
    ({"names": "abc"}, InvalidArgumentTypeError, "names"),
    ({"names": ["a", 7]}, InvalidArgumentTypeError, "names"),
    ({"names": ["a", ""]}, InvalidArgumentError, "names"),
    ({"ttl": 0}, InvalidArgumentError, "ttl"),
    ({"tokens": [b"x" * 16]}, InvalidArgumentError, "tokens"),
]


def test_bad_arguments_are_refused_before_anything_is_sent(own_server: RedisServer, core_name: str) -> None:
    raw = redis.Redis(port=own_server.port)
    with LockClient.from_url(own_server.url, core=core_name) as client:
        for change, error, argument in BAD_ARGUMENTS:
            call: dict[str, Any] = {"names": ["a", "b", "c"], "ttl": 30, "limit": 2, **change}
            with pytest.raises(error) as raised:
                claim(client, call.pop("names"), call.pop("ttl"), call.pop("limit"), **call)
            assert raised.value.argument == argument, change  # type: ignore[attr-defined]
    stats = raw.info("commandstats")
    assert not {"cmdstat_evalsha", "cmdstat_eval", "cmdstat_script", "cmdstat_set"} & set(stats), stats
    assert raw.dbsize() == 0
    raw.close()


@pytest.mark.parametrize("lost_chunk", [1, 2], ids=["first-chunk", "second-chunk"])
def test_a_lost_reply_gives_back_everything_the_claim_took(own_server: RedisServer, core_name: str,
                                                           lost_chunk: int) -> None:
    raw = redis.Redis(port=own_server.port)
    names = shards(64)
    with LockClient.from_url(own_server.url, core=core_name, timeout=0.3, chunk_size=8) as client:
        client.query("warm-up")
        hook(client, lost_chunk, own_server.pause)
        try:
            with pytest.raises(AcquireOutcomeUnknownError) as raised:
                claim(client, names, 60, 12)
        finally:
            own_server.resume()
        error = raised.value
        assert error.acquired == []
        assert len(error.names) == 8 * lost_chunk, "the leases taken and the chunk whose reply was lost"
        assert error.not_sent == [name for name in names if name not in error.names], "the rest, in order"
        eventually_no_keys(client, raw)
        result = claim(client, names, 60, 12)
        assert len(result.acquired) == 12, "the client works again"
    raw.close()


def test_an_error_reply_gives_back_what_earlier_chunks_took(own_server: RedisServer, core_name: str) -> None:
    raw = redis.Redis(port=own_server.port)
    with LockClient.from_url(own_server.url, core=core_name, chunk_size=8) as client:
        hook(client, 2, lambda: raw.config_set("maxmemory", "1"))
        try:
            with pytest.raises(ResponseError) as raised:
                claim(client, shards(64), 60, 12)
        finally:
            raw.config_set("maxmemory", "0")
        assert raised.value.code == "OOM"
        eventually_no_keys(client, raw)
    raw.close()


def claim_worker(index: int, url: str, core: str, prefix: str, names: list[str], k: int,
                 start: Any) -> dict[str, Any]:
    """One worker process of a pool: claims its k shards when every worker is ready, and keeps them."""
    with LockClient.from_url(url, core=core, key_prefix=prefix, timeout=10.0) as client:
        client.query("warm-up")
        start.wait(30)
        result = claim(client, names, 60, k)
        return {"implementation": client.implementation,
                "taken": {lease.name: lease.token.hex() for lease in result.acquired}}


@pytest.mark.slow
def test_a_pool_of_processes_shares_the_shards(redis_server: RedisServer, core_name: str, key_prefix: str,
                                               raw: redis.Redis) -> None:
    workers, k = 4, 16
    names = shards(workers * k)
    start = CTX.Barrier(workers)
    args = (redis_server.url, core_name, key_prefix, names, k, start)
    reports = run_workers(claim_worker, [args] * workers)
    assert {report["implementation"] for report in reports} == {core_name}
    assert [len(report["taken"]) for report in reports] == [k] * workers, "each worker got its k shards"
    owners: dict[str, int] = {}
    for index, report in enumerate(reports):
        for name in report["taken"]:
            assert name not in owners, f"{name} held by workers {owners[name]} and {index}"
            owners[name] = index
    assert sorted(owners) == sorted(names)
    stored = raw.mget([key_prefix + name for name in names])
    assert [value.hex() for value in stored] == [reports[owners[name]]["taken"][name] for name in names], \
        "the server holds each shard with its one owner's token"


# -- the plan alone, sans-IO ---------------------------------------------------------------------


def plan_of(count: int, limit: int, chunk_size: int, start: int = 0) -> ClaimPlan:
    return ClaimPlan(shards(count), 30_000, limit, None, object(), chunk_size, start=start)


def encoded(plan: ClaimPlan, core_name: str) -> list[bytes]:
    core = _core.get_core(core_name)
    buf = core.CommandBuffer(b"p:")
    plan.encode(buf)
    parser = core.RespParser()
    parser.feed(buf.take())
    (command,) = parser.get_replies()
    return list(command)


def test_plan_encodes_each_chunk_with_what_is_still_wanted(core_name: str) -> None:
    plan = plan_of(20, limit=6, chunk_size=8, start=17)
    plan.next_chunk()
    command = encoded(plan, core_name)
    assert command[:3] == [b"EVALSHA", CLAIM.sha, b"8"]
    assert command[3:11] == [b"p:shard:%d" % i for i in (17, 18, 19, 0, 1, 2, 3, 4)]
    assert command[11:14] == [b"30000", b"6", b""]  # ttl, wanted, no fence counter: not fenced
    first_tokens = set(command[14:])
    assert len(command) == 14 + 8 and len(first_tokens) == 1, "one fresh token for the chunk's keys"
    assert all(len(t) == 16 for t in first_tokens)
    assert plan.settle([1, 5])  # took 18 and 2; the other six were held elsewhere
    plan.next_chunk()
    command = encoded(plan, core_name)
    assert len(set(command[14:]) | first_tokens) == 2, "each chunk draws its own token"
    assert command[3:11] == [b"p:shard:%d" % i for i in range(5, 13)]
    assert command[12] == b"4", "the second chunk may take only what is still wanted"
    assert plan.settle([0, 2, 3, 6])  # took 5, 7, 8 and 11: done, 12 never tried
    assert plan.finished
    result = plan.result()
    assert [lease.name for lease in result.acquired] == [f"shard:{i}" for i in (2, 5, 7, 8, 11, 18)]
    assert result.not_acquired == [f"shard:{i}" for i in (0, 1, 3, 4, 6, 9, 10, 17, 19)]
    assert result.not_tried == [f"shard:{i}" for i in range(12, 17)]


def test_plan_sends_twice_what_is_wanted_scaled_by_what_was_found_held() -> None:
    plan = plan_of(1000, limit=10, chunk_size=1000)
    plan.next_chunk()
    assert len(plan.maybe_held(0.0)) == 20, "twice the 10 wanted"
    assert plan.settle([])  # all 20 held elsewhere
    plan.next_chunk()
    assert len(plan.maybe_held(0.0)) == 2 * 10 * 21, "none of 20 free: about 20 times as many"
    assert plan.settle([0, 10, 20, 30, 40, 50])
    plan.next_chunk()
    assert len(plan.maybe_held(0.0)) == -(-2 * 4 * 441 // 7), "4 wanted, 6 free of the 440 tried"
    plan = plan_of(1000, limit=500, chunk_size=300)
    plan.next_chunk()
    assert len(plan.maybe_held(0.0)) == 300, "never more than chunk_size"


@pytest.mark.parametrize("reply", [None, b"OK", 3, [3, 1], [0, 0], [8], [-1], [0, 1, 2, 3], [b"0"], [True]],
                         ids=repr)
def test_plan_refuses_a_reply_it_cannot_read(reply: object) -> None:
    plan = plan_of(20, limit=3, chunk_size=8)
    plan.next_chunk()
    assert plan.settle(reply) is False
    assert plan.taken == 0 and plan.tried == 0 and not plan.finished
    assert [name for name, _, _, _ in plan.maybe_held(0.0)] == shards(6), "the whole chunk may be held"
    assert plan.held(0.0) == []
