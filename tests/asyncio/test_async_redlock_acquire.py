"""AsyncRedlockClient with every master up, on 3 and 5 masters, on both cores and both loops:
acquire, extend, release, check and query, the results and their statuses, what is left on each
master, and the same answers as the blocking RedlockClient over the same keys."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from _async_redlock_workers import TTL, pttls, values
from async_helpers import Runner

from _raw import Raws
from turbolock import (
    ExtensionLimitError,
    InstanceSummary,
    LockInfo,
    LockLostError,
    RedlockClient,
    RedlockLease,
    RedlockNotAcquiredError,
    RedlockResult,
    RedlockStatus,
)
from turbolock.asyncio import AsyncLockClient, AsyncRedlockClient
from turbolock.redis_server import RedisServer

MakeRedlock = Callable[..., AsyncRedlockClient]

DRIFT = TTL * 0.01 + 0.002  # the default drift allowance for TTL: 1% and 2 ms


def test_acquire_takes_the_lock_on_every_master_with_one_token(
        arun: Runner, masters: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    count = len(masters)
    connections = raws(masters)

    async def body() -> None:
        async with make_async_redlock(masters) as client:
            assert client.quorum == count // 2 + 1
            await client.query("warm-up")  # a first call opens them within its node timeout
            started = time.monotonic()
            result = await client.acquire("order:1", TTL)
            elapsed = time.monotonic() - started
            assert isinstance(result, RedlockResult)
            assert result and result.acquired and result.status is RedlockStatus.ACQUIRED
            assert result.attempts == 1 and result.quorum == count // 2 + 1 and result.errors == ()
            assert result.instances == InstanceSummary(count, 0, 0)
            lease = result.lease
            assert isinstance(lease, RedlockLease) and lease.name == "order:1" and len(lease.token) == 16
            assert lease.instances == InstanceSummary(count, 0, 0)
            assert values(connections, key_prefix + "order:1") == [lease.token] * count
            assert all(TTL * 1000 - 1000 < pttl <= TTL * 1000
                       for pttl in pttls(connections, key_prefix + "order:1"))
            # Validity: the ttl less the time taken and the drift allowance, never more.
            assert TTL - DRIFT - elapsed - 0.5 <= lease.valid_for() < TTL - DRIFT
            assert lease.status is RedlockStatus.ACQUIRED and lease.ttl == TTL
            assert "acquired" in result.describe() and "order:1" in result.describe()
            assert await client.release(lease) is True
            assert lease.status is RedlockStatus.UNLOCKED
            assert values(connections, key_prefix + "order:1") == [None] * count
            assert await client.release(lease) is False  # gone everywhere: nothing of ours is left

    arun(body)


def test_the_client_describes_itself_like_the_blocking_one(
        arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock, core_name: str,
        key_prefix: str) -> None:
    async def body() -> None:
        client = make_async_redlock(three, chunk_size=7)
        async with client as entered:
            assert entered is client
            assert isinstance(client.masters, tuple) and len(client.masters) == 3
            assert all(isinstance(master, AsyncLockClient) for master in client.masters)
            assert client.implementation == core_name and client.key_prefix == key_prefix.encode()
            assert client.chunk_size == 7 and client.renewing == 0
            with RedlockClient([server.url for server in three], core=core_name) as blocking:
                for ms in (40, 100, 500, 2000, 20_000, 60_000, 3_600_000):
                    assert client.node_timeout_for(ms) == blocking.node_timeout_for(ms), ms
                    assert client.chunk_timeout_for(ms) == blocking.chunk_timeout_for(ms), ms
            assert client.node_timeout_for(2000) == 0.05 and client.node_timeout_for(100) == 0.01
            assert client.chunk_timeout_for(2000) == 0.2 and client.chunk_timeout_for(60_000) == 1.0
            assert "127.0.0.1" in repr(client)
        tuned = make_async_redlock(three, node_timeout=0.3)
        assert tuned.node_timeout_for(100) == 0.3 and tuned.chunk_timeout_for(60_000) == 1.0
        assert make_async_redlock(three).chunk_size == 1000
        await tuned.close()

    arun(body)


def test_a_held_lock_is_conflicted_for_others_sync_and_async(
        arun: Runner, masters: list[RedisServer], make_async_redlock: MakeRedlock, core_name: str,
        key_prefix: str) -> None:
    count = len(masters)

    async def body() -> None:
        async with make_async_redlock(masters) as first, make_async_redlock(masters) as second:
            lease = await first.try_acquire("account:7", TTL)
            assert lease is not None
            result = await second.acquire("account:7", TTL, blocking=False)
            assert not result and result.lease is None and result.attempts == 1
            assert result.status is RedlockStatus.CONFLICTED
            assert result.instances == InstanceSummary(0, count, 0)
            assert "conflicted" in result.describe() and "account:7" in result.describe()
            assert await second.try_acquire("account:7", TTL) is None
            # The blocking client over the same keys sees the same lock, and the other way round.
            with RedlockClient([server.url for server in masters], core=core_name,
                               key_prefix=key_prefix) as blocking:
                assert blocking.acquire("account:7", TTL, blocking=False).status is RedlockStatus.CONFLICTED
                assert await first.release(lease) is True
                taken = blocking.try_acquire("account:7", TTL)
                assert taken is not None
                again = await second.acquire("account:7", TTL, blocking=False)
                assert again.status is RedlockStatus.CONFLICTED
                assert again.instances == InstanceSummary(0, count, 0)
                assert blocking.release(taken)
            lease = await second.try_acquire("account:7", TTL)
            assert lease is not None and await second.release(lease)

    arun(body)


def test_the_quorum_decides_with_others_on_a_minority_or_a_majority(
        arun: Runner, masters: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    count = len(masters)
    quorum = count // 2 + 1
    connections = raws(masters)
    for raw in connections[:count - quorum]:
        raw.set(key_prefix + "split", b"someone-else", px=60_000)
    for raw in connections[count - quorum:]:  # a majority: all but the first count - quorum
        raw.set(key_prefix + "mostly-taken", b"someone-else", px=60_000)

    async def body() -> None:
        async with make_async_redlock(masters) as client:
            result = await client.acquire("split", TTL, blocking=False)
            assert result.status is RedlockStatus.ACQUIRED, result.describe()
            assert result.instances == InstanceSummary(quorum, count - quorum, 0)
            assert result.lease is not None
            assert values(connections, key_prefix + "split") == \
                [b"someone-else"] * (count - quorum) + [result.lease.token] * quorum
            assert await client.release(result.lease) is True
            assert values(connections, key_prefix + "split") == \
                [b"someone-else"] * (count - quorum) + [None] * quorum

            result = await client.acquire("mostly-taken", TTL, blocking=False)
            assert result.status is RedlockStatus.CONFLICTED and result.lease is None
            assert result.instances == InstanceSummary(count - quorum, quorum, 0)
            # What was taken on the minority does not count, and is not left there.
            assert values(connections, key_prefix + "mostly-taken") == \
                [None] * (count - quorum) + [b"someone-else"] * quorum

    arun(body)


def test_blocking_acquire_retries_until_its_timeout_or_until_free(
        arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock) -> None:
    async def body() -> None:
        async with make_async_redlock(three) as holder, \
                make_async_redlock(three, retry_delay=0.02) as waiter:
            lease = await holder.try_acquire("busy", 0.3)
            assert lease is not None
            started = time.monotonic()
            result = await waiter.acquire("busy", TTL, timeout=0.1)
            elapsed = time.monotonic() - started
            assert result.status is RedlockStatus.CONFLICTED and result.attempts > 1
            assert 0.09 <= elapsed < 0.1 + 1.0, f"a 0.1 s wait took {elapsed:.3f}s"
            result = await waiter.acquire("busy", TTL, timeout=5)  # the holder's 0.3 s ttl runs out
            assert result.status is RedlockStatus.ACQUIRED and result.lease is not None
            assert result.attempts > 1
            assert await waiter.release(result.lease) is True and await holder.release(lease) is False

            # timeout=None waits until the lock is free: here, until the holder releases it.
            lease = await holder.try_acquire("busy", 30)
            assert lease is not None

            async def release_soon() -> None:
                await asyncio.sleep(0.2)
                assert lease is not None and await holder.release(lease)

            releaser = asyncio.ensure_future(release_soon())
            started = time.monotonic()
            result = await waiter.acquire("busy", TTL)
            assert result.status is RedlockStatus.ACQUIRED and result.lease is not None
            assert 0.19 <= time.monotonic() - started < 3.0
            await releaser
            assert await waiter.release(result.lease)

    arun(body)


def test_the_retry_count_bounds_a_blocking_acquire(arun: Runner, three: list[RedisServer],
                                                   make_async_redlock: MakeRedlock) -> None:
    async def body() -> None:
        async with make_async_redlock(three) as holder, \
                make_async_redlock(three, retry_count=2, retry_delay=0.005) as waiter:
            lease = await holder.try_acquire("busy", TTL)
            assert lease is not None
            started = time.monotonic()
            result = await waiter.acquire("busy", TTL)
            assert time.monotonic() - started < 1.0
            assert result.status is RedlockStatus.CONFLICTED and result.attempts == 3
            assert "after 3 attempts" in result.describe()
            once = await waiter.acquire("busy", TTL, blocking=False)
            assert once.attempts == 1 and once.status is RedlockStatus.CONFLICTED
            assert (await waiter.acquire("busy", TTL, timeout=0)).attempts == 1
            assert await holder.release(lease)

    arun(body)


def test_concurrent_tasks_get_their_own_tokens_on_every_master(
        arun: Runner, masters: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    """Many attempts in flight at once on one client: every reply must go to its own call."""
    count = len(masters)
    connections = raws(masters)
    held = [f"held:{i}" for i in range(0, 60, 3)]
    for name in held:
        for raw in connections:
            raw.set(key_prefix + name, b"other", px=60_000)

    async def body() -> None:
        # 60 attempts at once queue up in one loop: a node timeout that leaves room for that on a
        # shared 2-core machine (what is checked is the replies' routing, not the timeout).
        async with make_async_redlock(masters, node_timeout=0.5) as client:
            await client.query("warm-up")  # connections open: what is checked is the replies' routing
            names = [f"held:{i}" if i % 3 == 0 else f"free:{i}" for i in range(60)]
            results = await asyncio.gather(*(client.acquire(name, TTL, blocking=False) for name in names))
            for name, result in zip(names, results, strict=True):
                assert result.name == name
                if name in held:
                    assert result.status is RedlockStatus.CONFLICTED, result.describe()
                    assert result.lease is None
                    assert values(connections, key_prefix + name) == [b"other"] * count
                else:
                    assert result.status is RedlockStatus.ACQUIRED and result.lease is not None, \
                        result.describe()
                    assert result.lease.name == name
                    assert values(connections, key_prefix + name) == [result.lease.token] * count, name
            leases = [result.lease for result in results if result.lease is not None]
            assert len({lease.token for lease in leases}) == 40
            checks = await asyncio.gather(*(client.check(lease) for lease in leases))
            assert all(left is not None and 0 < left <= TTL for left in checks)
            assert await asyncio.gather(*(client.release(lease) for lease in leases)) == [True] * 40
            for lease in leases:
                assert values(connections, key_prefix + str(lease.name)) == [None] * count

    arun(body)


def test_tasks_sharing_one_client_hold_one_name_one_at_a_time(
        arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock) -> None:
    inside = 0
    peak = 0
    entered = 0

    async def body() -> None:
        nonlocal inside, peak, entered
        async with make_async_redlock(three, retry_delay=0.005) as client:
            async def work(task: int) -> None:
                nonlocal inside, peak, entered
                for round_ in range(4):
                    own = await client.try_acquire(f"own:{task}:{round_}", TTL)
                    assert own is not None and await client.release(own)
                    result = await client.acquire("shared", TTL, timeout=10)
                    assert result.lease is not None, result.describe()
                    inside += 1
                    entered += 1
                    peak = max(peak, inside)
                    assert (await client.query("shared")).held  # a round trip while holding it
                    await asyncio.sleep(0.001)
                    inside -= 1
                    assert await client.release(result.lease)

            await asyncio.gather(*(work(task) for task in range(6)))

    arun(body)
    assert entered == 24 and peak == 1


def test_extend_resets_the_ttl_on_every_master(arun: Runner, masters: list[RedisServer],
                                              make_async_redlock: MakeRedlock, raws: Raws,
                                              key_prefix: str) -> None:
    count = len(masters)
    connections = raws(masters)

    async def body() -> None:
        async with make_async_redlock(masters) as client:
            lease = await client.try_acquire("job", 1)
            assert lease is not None
            assert await client.extend(lease, 30) is True
            assert lease.ttl == 30 and lease.extensions == 1 and 29 < lease.valid_for() < 30
            assert lease.instances == InstanceSummary(count, 0, 0)
            assert all(29_000 < pttl <= 30_000 for pttl in pttls(connections, key_prefix + "job"))
            # additive=True adds to the validity left instead of replacing it.
            assert await client.extend(lease, 10, additive=True) is True
            assert lease.extensions == 2 and 38.5 < lease.valid_for() < 40
            assert all(38_500 < pttl <= 40_000 for pttl in pttls(connections, key_prefix + "job"))
            assert await client.release(lease)
            assert await client.extend(lease, 30) is False  # released: nothing to extend
            assert values(connections, key_prefix + "job") == [None] * count

    arun(body)


def test_extend_sets_the_key_again_where_a_master_lost_it(arun: Runner, three: list[RedisServer],
                                                         make_async_redlock: MakeRedlock, raws: Raws,
                                                         key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as client:
            lease = await client.try_acquire("thinning", TTL)
            assert lease is not None
            connections[0].delete(key_prefix + "thinning")  # as a restart without persistence would
            assert await client.extend(lease, TTL) is True
            assert values(connections, key_prefix + "thinning") == [lease.token] * 3
            assert await client.release(lease)

    arun(body)


def test_extend_fails_once_others_hold_a_majority(arun: Runner, three: list[RedisServer],
                                                  make_async_redlock: MakeRedlock, raws: Raws,
                                                  key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as client:
            lease = await client.try_acquire("taken-over", TTL)
            assert lease is not None
            for raw in connections[:2]:
                raw.set(key_prefix + "taken-over", b"thief", px=60_000)
            assert await client.extend(lease, TTL) is False
            assert await client.check(lease) is None
            assert await client.release(lease) is False  # not ours on a majority; the thief's keys stay
            assert values(connections, key_prefix + "taken-over") == [b"thief", b"thief", None]

    arun(body)


def test_no_extend_after_the_validity_ended(arun: Runner, three: list[RedisServer],
                                            make_async_redlock: MakeRedlock, raws: Raws,
                                            key_prefix: str) -> None:
    async def body() -> None:
        async with make_async_redlock(three) as client:
            lease = await client.try_acquire("brief", 0.1)
            assert lease is not None
            await asyncio.sleep(0.12)
            assert lease.valid_for() == 0 and lease.status is RedlockStatus.EXPIRED
            with pytest.raises(LockLostError):
                lease.ensure_held()
            assert await client.extend(lease, TTL) is False  # even though nobody else took it
            assert values(raws(three), key_prefix + "brief") == [None] * 3

    arun(body)


def test_max_extensions_limits_extends(arun: Runner, three: list[RedisServer],
                                       make_async_redlock: MakeRedlock) -> None:
    async def body() -> None:
        async with make_async_redlock(three) as client:
            lease = await client.try_acquire("limited", TTL, max_extensions=2)
            assert lease is not None and lease.max_extensions == 2
            assert await client.extend(lease, TTL) and await client.extend(lease, TTL)
            with pytest.raises(ExtensionLimitError, match="limited"):
                await client.extend(lease, TTL)
            assert lease.extensions == 2 and await client.release(lease)
            result = await client.acquire("limited", TTL, max_extensions=0)
            assert result.lease is not None
            with pytest.raises(ExtensionLimitError):
                await client.extend(result.lease, TTL)
            assert await client.release(result.lease)

    arun(body)


def test_check_and_query_follow_the_quorum(arun: Runner, three: list[RedisServer],
                                           make_async_redlock: MakeRedlock, raws: Raws,
                                           key_prefix: str) -> None:
    first, second, third = raws(three)
    key = key_prefix + "q"

    async def body() -> None:
        async with make_async_redlock(three) as client:
            assert await client.query("q") == LockInfo(False, None)
            lease = await client.try_acquire("q", 10)
            assert lease is not None
            info = await client.query("q")
            assert isinstance(info, LockInfo) and len(info) == 2  # held and remaining only: never the token
            assert info.held and info.remaining is not None and 9 < info.remaining <= 10
            left = await client.check(lease)
            assert left is not None and 9 < left <= 10
            first.pexpire(key, 3000)
            info = await client.query("q")
            assert info.held and info.remaining is not None and 9 < info.remaining <= 10  # two hold it fully
            second.pexpire(key, 5000)
            info = await client.query("q")
            # The quorum's weaker one.
            assert info.held and info.remaining is not None and 4 < info.remaining <= 5
            left = await client.check(lease)
            assert left is not None and 4 < left <= 5
            first.set(key, b"thief", px=60_000)
            info = await client.query("q")
            # Held by anyone: a quorum (the thief's 60 s and the third's 10 s) has it for 10 s at least.
            assert info.held and info.remaining is not None and 9 < info.remaining <= 10
            left = await client.check(lease)
            assert left is not None and 4 < left <= 5  # ours on second and third
            second.delete(key)
            assert await client.check(lease) is None  # ours on the third alone
            assert (await client.query("q")).held  # first (the thief's) and third
            first.delete(key)
            assert await client.query("q") == LockInfo(False, None)  # only one master still has it
            assert third.get(key) == lease.token
            assert await client.release(lease) is False
            assert third.exists(key) == 0  # released where it was still ours

    arun(body)


def test_an_adopted_lease_is_released_but_never_extended(arun: Runner, three: list[RedisServer],
                                                         make_async_redlock: MakeRedlock, raws: Raws,
                                                         key_prefix: str) -> None:
    token = b"adopted-token-0123"
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as taker, \
                make_async_redlock(three, node_timeout=0.05) as adopter:
            taken = await taker.try_acquire("adopt", 30, token=token)
            assert taken is not None and taken.token == token
            lease = adopter.lease("adopt", token)  # sync: nothing is sent
            assert isinstance(lease, RedlockLease) and lease.name == "adopt" and lease.token == token
            assert lease.valid_for() == 0
            # A Redlock extend needs validity left, and an adopted lease has none (as the blocking client).
            assert await adopter.extend(lease, 10) is False
            assert values(connections, key_prefix + "adopt") == [token] * 3
            assert await adopter.release(lease) is True
            assert values(connections, key_prefix + "adopt") == [None] * 3

    arun(body)


def test_an_adopted_lease_is_checked_and_released_with_default_settings(
        arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    """The same with the default node timeout (min(50 ms, ttl/10)): an adopted lease's ttl is not
    known here, which must not leave its check and release no time to hear the masters."""
    token = b"adopted-token-4567"
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as taker, make_async_redlock(three) as adopter:
            taken = await taker.try_acquire("adopt-default", 30, token=token)
            assert taken is not None
            lease = adopter.lease("adopt-default", token)
            left = await adopter.check(lease)
            assert left is not None and 29 < left <= 30
            assert await adopter.release(lease) is True
            assert values(connections, key_prefix + "adopt-default") == [None] * 3

    arun(body)


def test_the_token_never_shows(arun: Runner, three: list[RedisServer],
                               make_async_redlock: MakeRedlock) -> None:
    token = b"T0KEN-" + b"x" * 20

    async def body() -> None:
        async with make_async_redlock(three) as client, make_async_redlock(three) as other:
            result = await client.acquire("secret", TTL, token=token)
            assert result.lease is not None and result.lease.token == token
            refused = await other.acquire("secret", TTL, blocking=False)
            texts = [repr(result), repr(result.lease), str(result.lease), repr(refused), refused.describe(),
                     repr(client), repr(await client.query("secret"))]
            lock = client.lock("secret", TTL, blocking=False, token=token)
            texts.append(repr(lock))
            with pytest.raises(RedlockNotAcquiredError) as raised:
                async with lock:
                    pytest.fail("the lock is held by the lease above")
            texts += [str(raised.value), repr(raised.value)]
            assert not [text for text in texts if "T0KEN" in text or token.hex() in text]
            assert await client.release(result.lease)

    arun(body)


def test_leases_belong_to_their_client(arun: Runner, three: list[RedisServer],
                                       make_async_redlock: MakeRedlock, core_name: str,
                                       key_prefix: str) -> None:
    async def body() -> None:
        async with make_async_redlock(three) as first, make_async_redlock(three) as second:
            lease = await first.try_acquire("mine", TTL)
            assert lease is not None
            with pytest.raises(ValueError, match="another client"):
                await second.release(lease)
            with pytest.raises(ValueError, match="another client"):
                await second.extend(lease, TTL)
            with RedlockClient([server.url for server in three], core=core_name,
                               key_prefix=key_prefix) as blocking:
                with pytest.raises(ValueError, match="another client"):
                    blocking.release(lease)  # an asyncio client's lease is no blocking client's
                theirs = blocking.try_acquire("theirs", TTL)
                assert theirs is not None
                with pytest.raises(ValueError, match="another client"):
                    await first.release(theirs)
                assert blocking.release(theirs)
            async with AsyncLockClient.from_url(three[0].url, core=core_name,
                                                key_prefix=key_prefix) as single:
                with pytest.raises(TypeError):
                    await single.release(lease)  # a RedlockLease is no single-server Lease
                plain = await single.try_acquire("plain", TTL)
                assert plain is not None
                with pytest.raises(TypeError):
                    await first.release(plain)  # type: ignore[arg-type]
                assert await single.release(plain)
            assert await first.release(lease) is True

    arun(body)


def test_async_lock_clients_can_be_the_masters(arun: Runner, three: list[RedisServer], core_name: str,
                                               key_prefix: str, raws: Raws) -> None:
    connections = raws(three)

    async def body() -> None:
        singles = [AsyncLockClient.from_url(server.url, core=core_name, key_prefix=key_prefix)
                   for server in three]
        try:
            async with AsyncRedlockClient(singles) as client:
                assert client.key_prefix == key_prefix.encode()
                assert list(client.masters) == singles
                lease = await client.try_acquire("shared", TTL)
                assert lease is not None
                assert values(connections, key_prefix + "shared") == [lease.token] * 3
                # The masters' own single-lock calls still work alongside.
                single = await singles[0].try_acquire("alone", TTL)
                assert single is not None and await singles[0].release(single)
                assert await client.release(lease)
            # Closing the Redlock client leaves the AsyncLockClients it was given open and usable.
            after = [await single.try_acquire("after", TTL) for single in singles]
            assert all(lease is not None for lease in after)
            for single, lease_after in zip(singles, after, strict=True):
                assert lease_after is not None and await single.release(lease_after)
        finally:
            for single in singles:
                await single.close()

    arun(body)


def test_mixing_urls_and_clients_keeps_one_key_prefix(arun: Runner, three: list[RedisServer], core_name: str,
                                                      key_prefix: str, raws: Raws) -> None:
    connections = raws(three)

    async def body() -> None:
        given: list[Any] = [AsyncLockClient.from_url(three[0].url, core=core_name, key_prefix=key_prefix),
                            three[1].url, three[2].url]
        try:
            # The key prefix comes from the client given.
            async with AsyncRedlockClient(given, core=core_name) as client:
                assert client.key_prefix == key_prefix.encode()
                lease = await client.try_acquire("mixed", TTL)
                assert lease is not None
                assert values(connections, key_prefix + "mixed") == [lease.token] * 3
                assert await client.release(lease)
        finally:
            await given[0].close()

    arun(body)
