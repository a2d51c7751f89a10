"""Claiming at most k free Redlocks out of many names (``acquire_many(..., limit=k)``): exactly k
when k are free, each on every master with one token, never more than k, names held by others
skipped and reported, the rest listed as not tried, workers spread over the input, and the
quorum still enough with a master down. Real servers, both cores."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import pytest
import redis

from _raw import Raws
from scenarios._harness import CTX, run_workers
from turbolock import (
    InstanceSummary,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    RedlockClient,
    RedlockManyResult,
    RedlockStatus,
)
from turbolock._flows import redlock_claim
from turbolock.redis_server import RedisServer

from ._helpers import TTL, values, wait_for

MakeRedlock = Callable[..., RedlockClient]
OwnMasters = Callable[[int], list[RedisServer]]


def claim(client: RedlockClient, names: Sequence[Any], ttl: Any, limit: Any,
          **kwargs: Any) -> RedlockManyResult:
    """The call under test."""
    result = client.acquire_many(names, ttl, limit=limit, **kwargs)
    assert isinstance(result, RedlockManyResult)
    return result


def shards(count: int) -> list[str]:
    return [f"shard:{i}" for i in range(count)]


def stored(raw: redis.Redis, prefix: str) -> dict[bytes, bytes]:
    """Every key under ``prefix`` on one master, with its value."""
    keys = list(raw.scan_iter(match=prefix + "*", count=1000))
    return dict(zip(keys, raw.mget(keys), strict=True)) if keys else {}


def ours(raw: redis.Redis, prefix: str) -> dict[bytes, bytes]:
    """The keys under ``prefix`` not set by the tests' "other" holder."""
    return {key: value for key, value in stored(raw, prefix).items() if value != b"other"}


def run_start(indices: set[int], count: int) -> int:
    """Where ``indices`` begin if they are one run of names in a row (wrapping at ``count``)."""
    starts = [i for i in indices if (i - 1) % count not in indices]
    assert len(starts) == 1, f"not one run from a start: {sorted(indices)}"
    return starts[0]


def hold_elsewhere(connections: list[redis.Redis], prefix: str, names: Sequence[str]) -> None:
    """Someone else holds ``names`` on the given masters."""
    for raw in connections:
        for name in names:
            raw.set(prefix + name, b"other", px=60_000)


@pytest.fixture(params=[1000, 3], ids=["chunk1000", "chunk3"])
def chunk_size(request: pytest.FixtureRequest) -> int:
    size: int = request.param
    return size


def test_takes_exactly_k_free_names_on_every_master(masters: list[RedisServer], make_redlock: MakeRedlock,
                                                    raws: Raws, key_prefix: str, chunk_size: int) -> None:
    count = len(masters)
    client = make_redlock(masters, chunk_size=chunk_size)
    names = shards(40)
    result = claim(client, names, TTL, 8)
    assert len(result) == 40 and result.names == names
    taken = {i for i, lease in enumerate(result) if lease is not None}
    assert len(taken) == 8 and len(result.acquired) == 8
    assert result.not_acquired == [] and result.no_quorum == []
    assert result.not_tried == [names[i] for i in range(40) if i not in taken], "the rest, in input order"
    assert result.counts() == {RedlockStatus.ACQUIRED: 8, RedlockStatus.NOT_TRIED: 32}
    run_start(taken, 40)
    for i in range(40):
        expected = InstanceSummary(count, 0, 0) if i in taken else InstanceSummary(0, 0, 0)
        assert result.summary(i) == expected
    connections = raws(masters)
    for lease in result.acquired:
        assert values(connections, key_prefix + str(lease.name)) == [lease.token] * count, "one token"
        assert 0 < lease.valid_for() <= TTL and lease.status is RedlockStatus.ACQUIRED
    assert all(len(stored(raw, key_prefix)) == 8 for raw in connections)
    assert client.release_many(result.acquired) == [True] * 8
    assert all(stored(raw, key_prefix) == {} for raw in connections)


def test_names_held_by_others_are_skipped_and_left_alone(
        masters: list[RedisServer], make_redlock: MakeRedlock, raws: Raws, key_prefix: str,
        chunk_size: int) -> None:
    count = len(masters)
    quorum = count // 2 + 1
    connections = raws(masters)
    names = shards(48)
    others = {i for i in range(48) if i % 3 != 0}  # 32 held on a majority of masters, 16 free
    hold_elsewhere(connections[:quorum], key_prefix, [names[i] for i in others])
    client = make_redlock(masters, chunk_size=chunk_size)
    result = claim(client, names, TTL, 6)
    taken = {i for i, lease in enumerate(result) if lease is not None}
    assert len(taken) == 6 and not taken & others
    refused = {names.index(name) for name in result.not_acquired}
    assert refused <= others and result.not_acquired == sorted(result.not_acquired, key=names.index)
    assert all(result.statuses[i] is RedlockStatus.CONFLICTED for i in refused)
    assert all(result.summary(i) == InstanceSummary(count - quorum, quorum, 0) for i in refused)
    untried = {names.index(name) for name in result.not_tried}
    assert taken | refused | untried == set(range(48)) and len(taken) + len(refused) + len(untried) == 48
    assert result.no_quorum == []
    start = run_start(taken | refused, 48)
    assert (start + len(taken | refused) - 1) % 48 in taken, "it stopped with the 6th free name"
    for i in others:  # untouched where they were held, and nothing of ours left on the other masters
        assert values(connections, key_prefix + names[i]) == [b"other"] * quorum + [None] * (count - quorum)
    assert all(len(ours(raw, key_prefix)) == 6 for raw in connections)
    assert client.release_many(result.acquired) == [True] * 6


def test_never_more_than_k_with_a_tiny_chunk_size(masters: list[RedisServer], make_redlock: MakeRedlock,
                                                  raws: Raws, key_prefix: str) -> None:
    count = len(masters)
    quorum = count // 2 + 1
    connections = raws(masters)
    names = shards(30)
    hold_elsewhere(connections[:quorum], key_prefix, names[::2])
    for size in (1, 2):
        client = make_redlock(masters, chunk_size=size)
        for k in (1, 3, 4, 7):
            result = claim(client, names, TTL, k)
            case = f"chunk_size {size}, limit {k}"
            assert len(result.acquired) == k, case
            assert all(len(ours(raw, key_prefix)) == k for raw in connections), case
            assert all(names.index(str(lease.name)) % 2 == 1 for lease in result.acquired)
            assert client.release_many(result.acquired) == [True] * k
    for raw in connections[:quorum]:
        assert set(stored(raw, key_prefix).values()) == {b"other"} and len(stored(raw, key_prefix)) == 15


def test_a_limit_above_the_free_names_takes_all_of_them(three: list[RedisServer], make_redlock: MakeRedlock,
                                                        raws: Raws, key_prefix: str, chunk_size: int) -> None:
    connections = raws(three)
    names = shards(24)
    others = set(range(0, 24, 4))
    hold_elsewhere(connections, key_prefix, [names[i] for i in others])
    client = make_redlock(three, chunk_size=chunk_size)
    result = claim(client, names, TTL, 1000)
    assert [lease is not None for lease in result] == [i not in others for i in range(24)]
    assert result.not_acquired == [names[i] for i in sorted(others)]
    assert result.not_tried == [] and result.no_quorum == []
    again = claim(client, names, TTL, 5)
    assert again.acquired == [] and again.not_acquired == names and again.not_tried == [], "nothing free left"
    assert client.release_many(result.acquired) == [True] * 18


def test_starts_spread_over_the_input(three: list[RedisServer], make_redlock: MakeRedlock) -> None:
    client = make_redlock(three)
    names = shards(64)
    first = set()
    for _ in range(30):
        result = claim(client, names, TTL, 1)
        first.update(lease.name for lease in result.acquired)
        client.release_many(result.acquired)
    assert len(first) >= 8, f"30 claims of one name out of 64 started at only {sorted(first)}"


def test_tokens_renewal_and_extension_limit_apply_to_what_was_taken(
        three: list[RedisServer], make_redlock: MakeRedlock, raws: Raws, key_prefix: str) -> None:
    client = make_redlock(three, chunk_size=2)
    names = shards(12)
    tokens = [b"token-%02d-........" % i for i in range(12)]
    result = claim(client, names, TTL, 5, tokens=tokens, auto_renew=True, max_extensions=3)
    assert len(result.acquired) == 5 and client.renewing == 5
    connections = raws(three)
    for lease in result.acquired:
        token = tokens[names.index(str(lease.name))]
        assert lease.token == token and lease.max_extensions == 3
        assert values(connections, key_prefix + str(lease.name)) == [token] * 3
    assert client.release_many(result.acquired) == [True] * 5 and client.renewing == 0
    assert claim(client, [], TTL, 3).leases == []


BAD_ARGUMENTS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"limit": 0}, InvalidArgumentError, "limit"),
    ({"limit": -3}, InvalidArgumentError, "limit"),
    ({"limit": 2.0}, InvalidArgumentTypeError, "limit"),
    ({"limit": "2"}, InvalidArgumentTypeError, "limit"),
    ({"limit": True}, InvalidArgumentTypeError, "limit"),
    ({"all_or_nothing": True}, InvalidArgumentError, "all_or_nothing"),
    ({"names": ["a", "b", "a"]}, InvalidArgumentError, "names"),
    ({"names": "abc"}, InvalidArgumentTypeError, "names"),
    ({"names": ["a", 7]}, InvalidArgumentTypeError, "names"),
    ({"names": ["a", ""]}, InvalidArgumentError, "names"),
    ({"ttl": 0}, InvalidArgumentError, "ttl"),
    ({"tokens": [b"x" * 16]}, InvalidArgumentError, "tokens"),
    ({"tokens": [b"x" * 16, b"short", b"y" * 16]}, InvalidArgumentError, "tokens"),
    ({"max_extensions": -1}, InvalidArgumentError, "max_extensions"),
]


def test_bad_arguments_are_refused_before_anything_is_sent(own_masters: OwnMasters, make_redlock: MakeRedlock,
                                                           raws: Raws) -> None:
    servers = own_masters(3)
    client = make_redlock(servers)
    for change, error, argument in BAD_ARGUMENTS:
        call: dict[str, Any] = {"names": ["a", "b", "c"], "ttl": TTL, "limit": 2, **change}
        with pytest.raises(error) as raised:
            claim(client, call.pop("names"), call.pop("ttl"), call.pop("limit"), **call)
        assert raised.value.argument == argument, change  # type: ignore[attr-defined]
    for raw in raws(servers):
        assert raw.dbsize() == 0
        stats = raw.info("commandstats")
        assert not {"cmdstat_evalsha", "cmdstat_eval", "cmdstat_script", "cmdstat_set"} & set(stats), stats
    assert len(claim(client, ["a", "b", "c"], TTL, 2).acquired) == 2, "the client works"


@pytest.mark.parametrize("count", [3, 5])
def test_the_claim_works_on_a_quorum_with_masters_stopped(own_masters: OwnMasters, make_redlock: MakeRedlock,
                                                          raws: Raws, key_prefix: str, count: int) -> None:
    servers = own_masters(count)
    quorum = count // 2 + 1
    live = servers[count - quorum:]
    connections = raws(live)
    names = shards(20)
    hold_elsewhere(connections, key_prefix, names[::5])
    client = make_redlock(servers, chunk_size=2)
    for server in servers[:count - quorum]:
        server.stop()
    started = time.monotonic()
    result = claim(client, names, TTL, 5)
    assert time.monotonic() - started < 2.0
    assert len(result.acquired) == 5 and result.no_quorum == []
    down = InstanceSummary(quorum, 0, count - quorum)
    for i in range(20):
        if result[i] is not None:
            assert result.summary(i) == down and i % 5 != 0
            lease = result[i]
            assert lease is not None and values(connections, key_prefix + names[i]) == [lease.token] * quorum
    for name in result.not_acquired:
        i = names.index(name)
        assert i % 5 == 0 and result.summary(i) == InstanceSummary(0, quorum, count - quorum)
    assert all(len(ours(raw, key_prefix)) == 5 for raw in connections)
    assert client.release_many(result.acquired) == [True] * 5


def test_a_claim_stops_when_no_quorum_answers(own_masters: OwnMasters, make_redlock: MakeRedlock,
                                              raws: Raws, key_prefix: str) -> None:
    servers = own_masters(3)
    client = make_redlock(servers)
    names = shards(20)
    servers[0].stop()
    servers[1].stop()
    result = claim(client, names, TTL, 3)
    assert result.acquired == [] and result.not_acquired == []
    assert len(result.no_quorum) == 3, "one chunk of the 3 wanted, then it stopped"
    run_start({names.index(str(name)) for name in result.no_quorum}, 20)
    assert result.not_tried == [name for name in names if name not in result.no_quorum]
    assert stored(raws(servers[2:])[0], key_prefix) == {}, "nothing left on the live master"


def test_an_interrupted_claim_gives_back_what_it_took(three: list[RedisServer], make_redlock: MakeRedlock,
                                                      raws: Raws, key_prefix: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    real = redlock_claim.acquire_many_flow
    connections = raws(three)
    calls: list[int] = []
    held: list[int] = []

    def interrupted_after_the_second_chunk(*args: Any,
                                           **kwargs: Any) -> Generator[Any, Any, RedlockManyResult]:
        calls.append(len(args[1]))
        result = yield from real(*args, **kwargs)
        if len(calls) == 2:  # the 2nd chunk ran: interrupted on its way back
            held.extend(len(stored(raw, key_prefix)) for raw in connections)
            raise KeyboardInterrupt
        return result

    client = make_redlock(three, chunk_size=4)
    monkeypatch.setattr(redlock_claim, "acquire_many_flow", interrupted_after_the_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        claim(client, shards(40), TTL * 10, 12)
    monkeypatch.undo()
    assert calls == [4, 4] and held == [8, 8, 8], "two chunks of 4 were taken on every master"
    assert wait_for(lambda: all(stored(raw, key_prefix) == {} for raw in connections), 5.0), \
        "everything the claim took is released in the background, long before its ttl"


# -- a pool of worker processes sharing the shards ------------------------------------------------

def claim_worker(index: int, urls: list[str], core: str, prefix: str, names: list[str], k: int,
                 start: Any) -> dict[str, Any]:
    """One worker of a pool: claims its k shards when every worker is ready, and keeps them.
    Two others may split a name's masters between them so that neither reaches a quorum (both
    give it back): a worker then claims again for what it still lacks, as a real one would."""
    client = RedlockClient(urls, core=core, key_prefix=prefix)
    try:
        client.query("warm-up")
        start.wait(30)
        taken: dict[str, str] = {}
        claims = 0
        while len(taken) < k and claims < 50:
            claims += 1
            result = client.acquire_many(names, 30, limit=k - len(taken))
            taken.update((str(lease.name), lease.token.hex()) for lease in result.acquired)
            if len(taken) < k:
                time.sleep(0.01)
        return {"implementation": client.implementation, "taken": taken, "claims": claims}
    finally:
        client.close()  # nothing auto-renewed: the locks stay held until their ttl


@pytest.fixture
def cleanup_keys(three: list[RedisServer], raws: Raws, key_prefix: str) -> Iterator[None]:
    yield
    for raw in raws(three):
        keys = list(stored(raw, key_prefix))
        if keys:
            raw.delete(*keys)


@pytest.mark.slow
@pytest.mark.usefixtures("cleanup_keys")
def test_a_pool_of_processes_shares_the_shards(three: list[RedisServer], raws: Raws, core_name: str,
                                               key_prefix: str) -> None:
    workers, k = 4, 4
    names = shards(workers * k)
    start = CTX.Barrier(workers)
    args = ([server.url for server in three], core_name, key_prefix, names, k, start)
    reports = run_workers(claim_worker, [args] * workers)
    assert {report["implementation"] for report in reports} == {core_name}
    assert [len(report["taken"]) for report in reports] == [k] * workers, "each worker got its k shards"
    owners: dict[str, int] = {}
    for index, report in enumerate(reports):
        for name in report["taken"]:
            assert name not in owners, f"{name} held by workers {owners[name]} and {index}"
            owners[name] = index
    assert sorted(owners) == sorted(names)
    connections = raws(three)
    for name in names:
        token = bytes.fromhex(reports[owners[name]]["taken"][name])
        held = values(connections, key_prefix + name)
        assert held.count(token) >= 2 and set(held) <= {token, None}, f"{name}: only its owner's token"
    assert sum(report["claims"] for report in reports) <= 4 * 10
