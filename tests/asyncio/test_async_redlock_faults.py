"""AsyncRedlockClient when masters fail: down, SIGSTOPped, restarted; every call returning within
its deadline; and the documented hazard of a master restarted without persistence, beside the
safe configuration (a restart delayed past the ttl).

A master "down" is a port nothing listens on, or a stopped server of the test's own; a "slow"
one is a session master SIGSTOPped (and always resumed) by the test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from _async_redlock_workers import TTL, values
from async_helpers import Runner

from _eventually import eventually_async as eventually
from _raw import Raws
from turbolock import InstanceSummary, QuorumError, RedlockStatus
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer, free_port

pytestmark = pytest.mark.slow

MakeRedlock = Callable[..., AsyncRedlockClient]
OwnMasters = Callable[[int], list[RedisServer]]

# Bounds, not speeds: a stuck master must cost about one node timeout (50 ms; a bulk chunk a
# tenth of the ttl), never the 5 s call timeout of its client; a loaded machine gets a margin.
BOUND = 1.5
LONG_TTL = 30
"""Seconds, for locks whose test is not about time (a loaded machine may take over 2 s)."""


def _keys_on(raw: redis.Redis, prefix: str) -> set[bytes]:
    return set(raw.scan_iter(match=prefix + "*", count=1000))


async def _timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    value = await call
    return value, time.monotonic() - started


@pytest.mark.parametrize("count", [3, 5])
def test_one_master_down_still_acquires(arun: Runner, session_masters: list[RedisServer],
                                        make_async_redlock: MakeRedlock, raws: Raws, key_prefix: str,
                                        count: int) -> None:
    live = session_masters[:count - 1]
    port = free_port()
    given: list[Any] = [live[0], f"redis://127.0.0.1:{port}/0", *live[1:]]  # master 1 is down
    connections = raws(live)
    names = [f"shard:{i}" for i in range(40)]

    async def body() -> None:
        async with make_async_redlock(given, chunk_size=10) as client:
            result, elapsed = await _timed(client.acquire("order", TTL, blocking=False))
            assert elapsed < BOUND
            assert result.status is RedlockStatus.ACQUIRED, result.describe()
            assert result.instances == InstanceSummary(count - 1, 0, 1)
            assert any("cannot connect" in error and str(port) in error for error in result.errors), \
                result.errors
            assert result.lease is not None
            assert values(connections, key_prefix + "order") == [result.lease.token] * (count - 1)
            assert await client.extend(result.lease, TTL) is True
            assert (await client.query("order")).held
            assert await client.release(result.lease) is True
            assert values(connections, key_prefix + "order") == [None] * (count - 1)

            many = await client.acquire_many(names, TTL)
            assert many.all_acquired
            assert {many.summary(i) for i in range(40)} == {InstanceSummary(count - 1, 0, 1)}
            assert await client.extend_many(many.acquired, TTL) == [True] * 40
            assert await client.release_many(many.acquired) == [True] * 40
            assert all(_keys_on(raw, key_prefix) == set() for raw in connections)

    arun(body)


@pytest.mark.parametrize("count", [3, 5])
def test_a_majority_down_is_no_quorum_and_leaves_nothing_held(
        arun_asyncio: Runner, own_masters: OwnMasters, make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str, count: int) -> None:
    servers = own_masters(count)
    quorum = count // 2 + 1
    down, live = servers[:quorum], servers[quorum:]
    connections = raws(live)
    names = [f"shard:{i}" for i in range(20)]

    async def body() -> None:
        async with make_async_redlock(servers, retry_count=3, retry_delay=0.005) as client:
            before = await client.try_acquire("before", TTL)
            earlier = (await client.acquire_many(names, TTL)).acquired
            assert before is not None and len(earlier) == 20
            for server in down:
                server.stop(remove_directory=False)

            result, elapsed = await _timed(client.acquire("order", TTL))
            assert elapsed < BOUND
            assert result.status is RedlockStatus.NO_QUORUM and result.lease is None
            assert result.instances == InstanceSummary(len(live), 0, len(down))
            assert result.attempts == 4  # the first try and 3 retries
            assert "no quorum" in result.describe()
            assert values(connections, key_prefix + "order") == [None] * len(live)
            with pytest.raises(QuorumError, match="no quorum") as info:
                await client.try_acquire("order", TTL)
            assert info.value.names == ["order"] and info.value.result.status is RedlockStatus.NO_QUORUM
            with pytest.raises(QuorumError):
                async with client.lock("order", TTL, blocking=False):
                    pytest.fail("the body must not run")
            with pytest.raises(QuorumError):
                await client.lock("order", TTL).acquire(timeout=0.1)
            assert values(connections, key_prefix + "order") == [None] * len(live)

            # Nothing can be decided about what was held before either.
            with pytest.raises(QuorumError, match=r"the query for .* is undecided"):
                await client.query("before")
            with pytest.raises(QuorumError):
                await client.check(before)
            with pytest.raises(QuorumError):
                await client.extend(before, TTL)
            with pytest.raises(QuorumError):  # released where it could be: unconfirmed
                await client.release(before)
            with pytest.raises(QuorumError) as info:
                await client.release_many(earlier)
            assert sorted(info.value.names) == sorted(names)  # type: ignore[type-var]
            again = await client.acquire_many(names, TTL)
            assert again.no_quorum == names and again.acquired == []
            assert again.statuses == [RedlockStatus.NO_QUORUM] * 20
            claim = await client.acquire_many(names, TTL, limit=3)
            assert claim.acquired == [] and len(claim.no_quorum) == 3 and len(claim.not_tried) == 17
            assert all(_keys_on(raw, key_prefix) == set() for raw in connections), \
                "nothing left on the live ones"

            for server in down:
                await asyncio.to_thread(server.start)
            lease = await client.try_acquire("order", TTL)  # the masters came back: the lock works again
            assert lease is not None and lease.instances == InstanceSummary(count, 0, 0)
            assert await client.release(lease)

    arun_asyncio(body)


def test_a_stopped_master_costs_one_node_timeout_in_every_call(
        arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    connections = raws(three)
    stopped = three[0]
    names = [f"job:{i}" for i in range(300)]

    async def body() -> None:
        async with make_async_redlock(three, chunk_size=50) as client:
            warm = await client.try_acquire("warm", TTL)  # connections open to all three, scripts loaded
            assert warm is not None and await client.release(warm)
            stopped.pause()
            try:
                leases = []
                for attempt in range(3):  # a pooled connection first, fresh connections after
                    result, elapsed = await _timed(client.acquire(f"slow-{attempt}", 10, blocking=False))
                    assert elapsed < BOUND, f"acquire took {elapsed:.3f}s with one master stopped"
                    assert result.status is RedlockStatus.ACQUIRED, result.describe()
                    assert result.instances == InstanceSummary(2, 0, 1)
                    assert any(str(stopped.port) in error for error in result.errors), result.errors
                    assert result.lease is not None and result.lease.valid_for() > 10 - BOUND - 0.2
                    leases.append(result.lease)
                lease = leases[0]
                extended, elapsed = await _timed(client.extend(lease, 10))
                assert extended is True and elapsed < BOUND
                left, elapsed = await _timed(client.check(lease))
                assert left is not None and 9 < left <= 10 and elapsed < BOUND
                info, elapsed = await _timed(client.query(lease.name))
                assert info.held and elapsed < BOUND
                for held in leases:
                    released, elapsed = await _timed(client.release(held))
                    assert released is True and elapsed < BOUND
                started = time.monotonic()
                async with client.lock("object", 10, timeout=1) as lock:
                    assert lock.result is not None and lock.result.instances == InstanceSummary(2, 0, 1)
                assert time.monotonic() - started < 2 * BOUND

                many, elapsed = await _timed(client.acquire_many(names, TTL))
                # One chunk timeout (a tenth of the ttl) for the stopped master, then it is left out.
                assert elapsed < TTL / 10 + BOUND, f"bulk acquire took {elapsed:.3f}s with one master stopped"
                assert many.all_acquired
                assert {many.summary(i) for i in range(len(names))} == {InstanceSummary(2, 0, 1)}
                flags, elapsed = await _timed(client.extend_many(many.acquired, TTL))
                assert flags == [True] * len(names) and elapsed < TTL / 10 + BOUND
                flags, elapsed = await _timed(client.release_many(many.acquired))
                assert flags == [True] * len(names) and elapsed < TTL / 10 + BOUND
                assert all(_keys_on(raw, key_prefix) == set() for raw in connections[1:])
            finally:
                stopped.resume()
            # The stopped master runs what was queued for it when it resumes; the releases it
            # missed are sent again in the background: nothing of ours stays there.
            assert await eventually(lambda: _keys_on(connections[0], key_prefix) == set(), 5.0), \
                _keys_on(connections[0], key_prefix)
            assert await eventually(lambda: all(m.pending_cleanup == 0 for m in client.masters), 5.0)

    arun(body)


def test_several_stopped_masters_cost_one_node_timeout_together(
        arun: Runner, session_masters: list[RedisServer], make_async_redlock: MakeRedlock) -> None:
    """Two of five masters stopped, a 0.3 s node timeout: an attempt waits for them once (about
    0.3 s), not once each (0.6 s)."""
    stopped = session_masters[:2]

    async def body() -> None:
        async with make_async_redlock(session_masters, node_timeout=0.3) as client:
            warm = await client.try_acquire("warm", TTL)
            assert warm is not None and await client.release(warm)
            for server in stopped:
                server.pause()
            try:
                result, elapsed = await _timed(client.acquire("two-down", 10, blocking=False))
                assert result.status is RedlockStatus.ACQUIRED
                assert result.instances == InstanceSummary(3, 0, 2)
                assert 0.29 <= elapsed < 0.55, f"two stopped masters cost {elapsed:.3f}s"
                info, elapsed = await _timed(client.query("two-down"))
                assert info.held and 0.29 <= elapsed < 0.55, f"a query cost {elapsed:.3f}s"
                assert result.lease is not None
                released, elapsed = await _timed(client.release(result.lease))
                assert released is True and elapsed < 0.55
            finally:
                for server in stopped:
                    server.resume()
            assert await eventually(lambda: all(m.pending_cleanup == 0 for m in client.masters), 5.0)

    arun(body)


def test_renewal_goes_on_while_a_master_is_stopped(arun_asyncio: Runner, three: list[RedisServer],
                                                   make_async_redlock: MakeRedlock, raws: Raws,
                                                   key_prefix: str) -> None:
    """A renewal round waits for a stopped master no longer than the lock's own expiry: the other
    two keep renewing it, and it is never reported lost."""
    connections = raws(three)
    ttl = 0.5

    async def body() -> None:
        async with make_async_redlock(three) as client:
            lease = await client.try_acquire("kept", ttl, auto_renew=True)
            assert lease is not None
            three[0].pause()
            try:
                assert await client.wait_lost(lease, ttl * 3) is False, lease.lost_reason
                assert lease.extensions >= 3 and lease.valid_for() > 0
                lease.ensure_held()
                assert values(connections[1:], key_prefix + "kept") == [lease.token] * 2
            finally:
                three[0].resume()
            assert await client.release(lease) is True
            assert await eventually(lambda: values(connections, key_prefix + "kept") == [None] * 3, 3.0)

    arun_asyncio(body)


def test_an_acquire_lost_on_stopped_masters_is_cleaned_up_when_they_answer(
        arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as client:
            warm = await client.try_acquire("warm", TTL)
            assert warm is not None and await client.release(warm)
            three[1].pause()
            three[2].pause()
            try:
                result, elapsed = await _timed(client.acquire("stalled", 10, blocking=False))
                assert elapsed < BOUND
                assert result.status is RedlockStatus.NO_QUORUM
                assert result.instances == InstanceSummary(1, 0, 2)
                # Released at once where it answered.
                assert connections[0].get(key_prefix + "stalled") is None
                # What the stopped ones may have taken is kept to release later.
                assert [master.pending_cleanup > 0 for master in client.masters] == [False, True, True]
            finally:
                three[1].resume()
                three[2].resume()
            # Released in the background once they answer, with no further call from us.
            assert await eventually(lambda: [m.pending_cleanup for m in client.masters] == [0, 0, 0], 5.0)
            assert values(connections, key_prefix + "stalled") == [None] * 3
            lease = await client.try_acquire("stalled", TTL)
            assert lease is not None and lease.instances == InstanceSummary(3, 0, 0)
            assert await client.release(lease)

    arun(body)


def test_concurrent_calls_after_the_masters_forgot_the_scripts(
        arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    """SCRIPT FLUSH on every master (as a restart does) under many tasks at once: each call
    reloads what it needs and gets its own answer. The locks are taken for ``LONG_TTL``: a
    loaded machine (a CI run) once took longer than the usual 2 s ttl over the gathered calls.
    Extended to 10 s, below it: a key's ttl then shows the extend ran."""
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three, chunk_size=8) as client:
            leases = (await client.acquire_many([f"s:{i}" for i in range(60)], LONG_TTL)).acquired
            assert len(leases) == 60
            for raw in connections:
                raw.script_flush()
            results = await asyncio.gather(
                *(client.extend(lease, 10) for lease in leases[:20]),
                *(client.check(lease) for lease in leases[20:30]),
                client.extend_many(leases[30:45], 10),
                *(client.release(lease) for lease in leases[45:]))
            assert results[:20] == [True] * 20
            assert all(left is not None and 10 < left <= LONG_TTL for left in results[20:30])
            assert results[30] == [True] * 15 and results[31:] == [True] * 15
            for lease in leases[:20] + leases[30:45]:
                assert all(0 < raw.pttl(key_prefix + str(lease.name)) <= 10_000 for raw in connections)
            assert await client.release_many(leases[:45]) == [True] * 45
            assert all(_keys_on(raw, key_prefix) == set() for raw in connections)

    arun(body)


def test_release_and_extend_after_masters_restarted(arun_asyncio: Runner, own_masters: OwnMasters,
                                                    make_async_redlock: MakeRedlock, raws: Raws,
                                                    key_prefix: str) -> None:
    servers = own_masters(3)
    connections = raws(servers)

    async def body() -> None:
        async with make_async_redlock(servers) as client:
            lease = await client.try_acquire("held", TTL)
            assert lease is not None
            servers[2].restart()  # forgets the key and the scripts; the loop is blocked meanwhile
            # It reconnects, reloads the script and sets the key again there.
            assert await client.extend(lease, TTL) is True
            assert values(connections, key_prefix + "held") == [lease.token] * 3
            await asyncio.to_thread(servers[0].restart)
            assert await client.release(lease) is True  # released on the two that had it
            assert values(connections, key_prefix + "held") == [None] * 3
            many = await client.acquire_many([f"n:{i}" for i in range(50)], TTL)
            assert many.all_acquired
            await asyncio.to_thread(servers[1].restart)
            assert await client.extend_many(many.acquired, TTL) == [True] * 50  # NOSCRIPT, load, retry
            assert len(_keys_on(connections[1], key_prefix)) == 50
            assert await client.release_many(many.acquired) == [True] * 50
            assert all(_keys_on(raw, key_prefix) == set() for raw in connections)

    arun_asyncio(body)


def test_a_master_restarted_mid_hold_is_taken_back_by_renewal(
        arun_asyncio: Runner, own_masters: OwnMasters, make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    servers = own_masters(3)
    connections = raws(servers)

    async def body() -> None:
        async with make_async_redlock(servers) as holder, make_async_redlock(servers) as rival:
            lost: list[object] = []
            lease = await holder.try_acquire("renewed", 1.0, auto_renew=True, on_lost=lost.append)
            assert lease is not None
            await asyncio.to_thread(servers[0].restart)
            assert await eventually(lambda: connections[0].get(key_prefix + "renewed") == lease.token, 3.0)
            await asyncio.to_thread(servers[1].restart)
            assert await eventually(lambda: connections[1].get(key_prefix + "renewed") == lease.token, 3.0)
            assert await rival.try_acquire("renewed", TTL) is None
            assert not lost and not lease.is_lost and lease.valid_for() > 0
            assert await holder.release(lease)

    arun_asyncio(body)


def test_hazard_a_master_restarted_without_persistence_lets_a_second_client_in(
        arun_asyncio: Runner, own_masters: OwnMasters, make_async_redlock: MakeRedlock) -> None:
    """The hazard the Redlock page documents: A holds the lock on masters 0 and 1 (master 2 was
    down), master 1 restarts at once with no persistence, and B takes masters 1 and 2. The
    negative control of the next test."""
    servers = own_masters(3)

    async def body() -> None:
        async with make_async_redlock(servers) as first, make_async_redlock(servers) as second:
            servers[2].stop(remove_directory=False)
            lease_a = await first.try_acquire("hazard", 10)
            assert lease_a is not None and lease_a.instances == InstanceSummary(2, 0, 1)
            await asyncio.to_thread(servers[2].start)
            await asyncio.to_thread(servers[1].restart)  # immediately, with the key lost
            lease_b = await second.try_acquire("hazard", 10)
            assert lease_b is not None, "the hazard did not reproduce"
            assert lease_b.instances == InstanceSummary(2, 1, 0)
            assert lease_a.valid_for() > 0 and lease_b.valid_for() > 0  # both believe they hold it

    arun_asyncio(body)


def test_safe_a_restart_delayed_past_the_ttl_keeps_the_second_client_out(
        arun_asyncio: Runner, own_masters: OwnMasters, make_async_redlock: MakeRedlock) -> None:
    """The same sequence, but master 1 stays down longer than the ttl before it comes back:
    B can only get in after A's validity is over."""
    ttl = 0.5
    servers = own_masters(3)

    async def body() -> None:
        async with make_async_redlock(servers) as first, make_async_redlock(servers) as second:
            servers[2].stop(remove_directory=False)
            lease_a = await first.try_acquire("safe", ttl)
            assert lease_a is not None and lease_a.instances == InstanceSummary(2, 0, 1)
            await asyncio.to_thread(servers[2].start)
            restart = asyncio.ensure_future(asyncio.to_thread(servers[1].restart, down_for=ttl + 0.2))
            taken_at = None
            statuses: set[RedlockStatus] = set()
            try:
                while taken_at is None and (not restart.done() or time.monotonic() < lease_a.expires_at + 2):
                    result = await second.acquire("safe", ttl, blocking=False)
                    statuses.add(result.status)
                    if result.lease is not None:
                        taken_at = time.monotonic()
                        assert lease_a.valid_for() == 0, "B got in while A's lock was still valid"
                        assert await second.release(result.lease)
                    await asyncio.sleep(0.01)
            finally:
                await restart
            assert taken_at is not None and taken_at >= lease_a.expires_at
            assert RedlockStatus.CONFLICTED in statuses or RedlockStatus.NO_QUORUM in statuses

    arun_asyncio(body)
