"""Fencing tokens: ``fenced=True`` acquires give leases whose fence grows with every grant of a
name, expiries included (threads and asyncio); the counter outlives the lock; bad combinations
are refused before anything is sent; ``FencedStore`` refuses reads and writes with an old fence."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from turbolock import (
    FencedLease,
    FencedStore,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    ResponseError,
    StaleFenceError,
)
from turbolock._wire.scripts import fence_counter


def _counter(key_prefix: str) -> bytes:
    return fence_counter(key_prefix.encode())


def test_fences_grow_with_every_grant_and_survive_expiry(make_client: Callable[..., Any], key_prefix: str,
                                                         raw: redis.Redis) -> None:
    client = make_client()
    fences = []
    for _ in range(3):
        lease = client.try_acquire("account", 10, fenced=True)
        assert isinstance(lease, FencedLease)
        assert client.try_acquire("account", 10, fenced=True) is None  # held: no grant, no fence used
        fences.append(lease.fence)
        assert client.release(lease)
    short = client.try_acquire("account", 0.05, fenced=True)
    assert short is not None
    time.sleep(0.1)  # expired, never released
    after = client.try_acquire("account", 10, fenced=True)
    assert after is not None
    fences += [short.fence, after.fence]
    assert fences == list(range(fences[0], fences[0] + 5))
    other = client.try_acquire("other", 10, fenced=True)
    assert other is not None and other.fence == fences[-1] + 1  # one counter for every name
    plain = client.try_acquire("plain", 10)
    assert plain is not None and plain.fence is None and not isinstance(plain, FencedLease)
    counter = _counter(key_prefix)
    assert raw.get(counter) == b"%d" % other.fence and raw.pttl(counter) == -1  # it never expires
    assert [key for key in raw.keys(f"*{key_prefix}*") if key.endswith(b":fence")] == [counter]
    assert f"fence={after.fence}" in repr(after) and after.token.hex() not in repr(after)


def test_a_new_counter_starts_above_every_fence_a_lost_one_gave(make_client: Callable[..., Any],
                                                                 key_prefix: str, raw: redis.Redis) -> None:
    # A counter that is gone (deleted, evicted, a restart without persistence) starts again at the
    # server's clock in microseconds: never below a fence it gave before, where restarting at 1
    # would hand the next holder a fence its resource refuses and let a stale holder write.
    client = make_client()
    before_us = int(time.time() * 1e6)
    first = client.try_acquire("account", 10, fenced=True)
    assert first is not None and before_us - 5_000_000 < first.fence < before_us + 5_000_000
    assert client.release(first)
    raw.set(_counter(key_prefix), first.fence + 10_000)  # as many more grants as it had given
    many = client.acquire_many([f"x:{i}" for i in range(3)], 10, fenced=True)
    assert [lease.fence for lease in many.acquired] == [first.fence + 10_001 + i for i in range(3)]
    raw.delete(_counter(key_prefix))
    time.sleep(0.02)  # 20,000 us: the clock is past every fence given
    again = client.try_acquire("account", 10, fenced=True)
    assert again is not None and again.fence > many.acquired[-1].fence
    assert client.release(again) and all(client.release_many(many.acquired))


def test_a_hash_tagged_name_draws_from_the_same_counter(make_client: Callable[..., Any], key_prefix: str,
                                                        raw: redis.Redis) -> None:
    client = make_client()
    lease = client.try_acquire("{acct:7}:transfer", 10, fenced=True)
    other = client.try_acquire("plain:name", 10, fenced=True)
    assert lease is not None and other is not None and other.fence == lease.fence + 1
    assert raw.get(_counter(key_prefix)) == b"%d" % other.fence
    assert raw.get(key_prefix.encode() + b"{acct:7}:transfer:fence") is None  # none of its own


@pytest.mark.parametrize(("options", "name", "fenced", "error", "argument"), [
    ({}, "a}b", True, InvalidArgumentError, "name"),
    ({}, "x", 1, InvalidArgumentTypeError, "fenced"),
    ({"replicas_ack": 1}, "x", True, InvalidArgumentError, "fenced"),
])
def test_bad_fenced_acquires_are_refused_before_sending(make_client: Callable[..., Any], key_prefix: str,
                                                        raw: redis.Redis, options: dict[str, Any], name: str,
                                                        fenced: object, error: type[Exception],
                                                        argument: str) -> None:
    client = make_client(**options)
    with pytest.raises(error) as raised:
        client.try_acquire(name, 10, fenced=fenced)
    assert raised.value.argument == argument  # type: ignore[attr-defined]
    assert raw.keys(f"*{key_prefix}*") == []


def test_the_store_refuses_an_older_fence_on_reads_and_writes(raw: redis.Redis, key_prefix: str) -> None:
    store = FencedStore(raw)
    key = key_prefix + "balance"
    assert store.read(key, 1) is None
    assert store.write(key, 100, 1)
    assert store.read(key, 2) == b"100"  # the successor has read: the old holder may not write
    assert not store.write(key, 101, 1)
    with pytest.raises(StaleFenceError):
        store.read(key, 1)
    assert store.write(key, 150, 2) and store.read(key, 2) == b"150"
    written = store.write_many([(key, 160, 1), (key, 170, 3), (key_prefix + "fresh", 1, 1)])
    assert written == [False, True, True]
    assert store.read(key, 3) == b"170"
    with pytest.raises(InvalidArgumentTypeError):
        store.write(key, 1, 0)


def test_bulk_fenced_acquires_give_each_lock_its_fence(make_client: Callable[..., Any], key_prefix: str,
                                                       raw: redis.Redis) -> None:
    client = make_client()
    names = [f"shard:{i}" for i in range(2500)]
    first = client.acquire_many(names, 10, fenced=True)
    fences = [lease.fence for lease in first.acquired]
    assert first.all_acquired and fences == list(range(fences[0], fences[0] + 2500))  # in input order
    assert all(isinstance(lease, FencedLease) for lease in first.acquired)
    held = client.acquire_many(["shard:7", "free"], 10, fenced=True)
    assert held.not_acquired == ["shard:7"]
    assert [lease.fence for lease in held.acquired] == [fences[-1] + 2]  # shard:7's fence was drawn, unused
    assert all(client.release_many(first.acquired))
    raw.script_flush()  # no script to load again: the transactions send the counter's source
    second = client.acquire_many(names, 10, fenced=True)
    assert second.all_acquired and [lease.name for lease in second.acquired] == names
    assert [lease.fence for lease in second.acquired] == list(range(fences[-1] + 3, fences[-1] + 2503))
    assert raw.get(_counter(key_prefix)) == b"%d" % (fences[-1] + 2502)
    assert all(client.release_many(second.acquired + held.acquired))


def test_bad_fenced_bulk_acquires_are_refused_before_sending(make_client: Callable[..., Any], key_prefix: str,
                                                             raw: redis.Redis) -> None:
    client = make_client()
    with pytest.raises(InvalidArgumentError) as bad_name:
        client.acquire_many(["fine", "a}b"], 10, fenced=True)
    assert bad_name.value.argument == "names"
    with pytest.raises(InvalidArgumentError) as claim:
        client.acquire_many(["fine", "a}b"], 10, fenced=True, limit=1)
    assert claim.value.argument == "names"
    assert raw.keys(f"*{key_prefix}*") == []


def test_a_fenced_claim_gives_each_lock_taken_its_fence(make_client: Callable[..., Any], raw: redis.Redis,
                                                        key_prefix: str) -> None:
    client = make_client()
    shards = [f"shard:{i}" for i in range(50)]
    held = client.acquire_many(shards[:20], 10)  # others hold 20 of them
    first = client.acquire_many(shards, 10, limit=10, fenced=True)
    assert len(first.acquired) == 10 and all(isinstance(lease, FencedLease) for lease in first.acquired)
    fences = [lease.fence for lease in first.acquired]
    assert sorted(fences) == list(range(min(fences), min(fences) + 10))  # one per lock taken, no gaps
    assert not {lease.name for lease in first.acquired} & set(shards[:20])
    assert all(client.release_many(first.acquired)) and all(client.release_many(held.acquired))
    raw.script_flush()  # the claim's script is loaded again
    second = client.acquire_many([lease.name for lease in first.acquired], 10, limit=10, fenced=True)
    assert sorted(lease.fence for lease in second.acquired) == list(range(max(fences) + 1, max(fences) + 11))
    plain = client.acquire_many(shards[20:40], 10, limit=5)
    assert all(lease.fence is None and not isinstance(lease, FencedLease) for lease in plain.acquired)
    assert raw.get(_counter(key_prefix)) == b"%d" % (max(fences) + 10)
    assert all(client.release_many(second.acquired + plain.acquired))


def test_a_fenced_lock_object_gets_a_new_fence_on_every_acquire(make_client: Callable[..., Any]) -> None:
    client = make_client()
    lock = client.lock("job", 10, fenced=True)
    assert lock.fence is None
    fences = []
    for _ in range(3):
        assert lock.acquire()
        fences.append(lock.fence)
        lock.release()
    assert fences == list(range(fences[0], fences[0] + 3)) and lock.fence is None
    plain = client.lock("plain", 10)
    assert plain.acquire() and plain.fence is None
    plain.release()
    with pytest.raises(InvalidArgumentError) as refused:
        client.lock("a}b", 10, fenced=True)
    assert refused.value.argument == "name"


def test_a_fenced_lock_that_waits_gets_the_next_fence(make_client: Callable[..., Any]) -> None:
    client = make_client()
    holder = client.try_acquire("waited", 0.3, fenced=True)
    assert holder is not None
    lock = client.lock("waited", 10, fenced=True)
    assert lock.acquire(timeout=3)  # waits for the holder's ttl to run out
    assert lock.fence == holder.fence + 1
    lock.release()


def test_the_sql_recipe_refuses_an_older_fence_in_sqlite() -> None:
    import sqlite3

    from turbolock.fenced_sql import fenced_read_sql, fenced_write_sql

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER, "
               "last_fence INTEGER NOT NULL DEFAULT 0)")
    db.execute("INSERT INTO accounts (id, balance) VALUES ('a', 100)")
    read = fenced_read_sql("accounts", "id", ["balance"])
    write = fenced_write_sql("accounts", "id", ["balance"])
    assert db.execute(read, {"key": "a", "fence": 1}).fetchall() == [(100,)]  # the old holder reads
    assert db.execute(read, {"key": "a", "fence": 2}).fetchall() == [(100,)]  # its successor reads
    late = db.execute(write, {"key": "a", "fence": 1, "balance": 101})
    assert late.rowcount == 0  # the paused holder's write: refused
    assert db.execute(read, {"key": "a", "fence": 1}).fetchall() == []
    assert db.execute(write, {"key": "a", "fence": 2, "balance": 101}).rowcount == 1
    assert db.execute("SELECT balance, last_fence FROM accounts").fetchall() == [(101, 2)]
    assert fenced_write_sql("t", "k", ["v"], paramstyle="pyformat") == (
        'UPDATE "t" SET "v" = %(v)s, "last_fence" = %(fence)s '
        'WHERE "t"."k" = %(key)s AND ("t"."last_fence" IS NULL OR "t"."last_fence" <= %(fence)s)')
    for bad in ({"table": "t; DROP TABLE t"}, {"columns": []}, {"paramstyle": "qmark"}):
        arguments: dict[str, Any] = {"table": "t", "key_column": "k", "columns": ["v"], **bad}
        with pytest.raises(InvalidArgumentError):
            fenced_write_sql(**arguments)


def _lock_keys(raw: redis.Redis, key_prefix: str) -> list[bytes]:
    return [key for key in raw.scan_iter(match=key_prefix + "*", count=1000) if not key.endswith(b":fence")]


@pytest.mark.parametrize("give_back", [True, False], ids=["given-back", "control-keeps-them"])
def test_a_batched_fenced_call_whose_counter_fails_leaves_no_lock(
        make_client: Callable[..., Any], key_prefix: str, raw: redis.Redis, give_back: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A counter that is not a number fails inside each transaction, after which its SETs still run
    # (EXEC does not stop at an error): the call raises the counter's error and gives back every
    # lock of each failed transaction. The control gives back nothing and finds all 2,500 held.
    if not give_back:
        from turbolock._flows.bulk_plan import AcquirePlan

        monkeypatch.setattr(AcquirePlan, "_give_back_failed_calls", lambda self, start, replies: None)
    client = make_client()
    names = [f"shard:{i}" for i in range(2500)]
    raw.set(_counter(key_prefix), b"not a number")
    with pytest.raises(ResponseError, match="not an integer"):
        client.acquire_many(names, 10, fenced=True)
    deadline = time.monotonic() + 3.0
    while _lock_keys(raw, key_prefix) and give_back and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _lock_keys(raw, key_prefix)
    assert raw.get(_counter(key_prefix)) == b"not a number"
    assert left == [] if give_back else len(left) == 2500
