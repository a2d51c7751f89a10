"""Every call of ``AsyncRedlockClient`` keeps its deadline when one or two of its three masters stop
answering (a silent server, a SIGSTOPped redis-server, a black-holed proxy), and a task cancelled
mid-call leaves no lock behind.

The promise is ``RedlockClient``'s (``test_redlock_deadlines``), for the asyncio twin: a
single-lock call (try_acquire, acquire(blocking=False), query, check, release, extend, and the
``AsyncRedlockLock`` calls that make one) ends within ``node_timeout`` + ``SLACK`` per attempt;
``acquire(timeout=W)`` and a Lock object's wait within W + ``SLACK``; a bulk call (acquire_many
with and without ``limit``, release_many, extend_many) within ``chunk_timeout_for(ttl_ms)`` +
``SLACK``; ``wait_lost(timeout=X)`` within X, and, when no quorum can renew the lease, by the
expiry the lease believed in. With one faulty master the quorum stands and the calls succeed;
with two they fail with ``QuorumError`` (a ``turbolock.ConnectionError``) or say NO_QUORUM.
``close()`` is measured too, against what the threaded client's costs: the release of the
renewed locks (one chunk timeout) and one node timeout for the maybe-held releases.

The client is warmed up (connections opened by one call against the masters that answer) before
the faults start, as a service's client would be. Everything runs on asyncio's own loop; one
fault set (a black-holed master) runs on uvloop instead when it is installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis

from _netfaults import Fault, Outcome, Stopwatch, open_fault, paused
from turbolock import (
    ConnectionError,
    LockNotAcquiredError,
    LockNotOwnedError,
    QuorumError,
    RedlockLease,
    RedlockStatus,
)
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

from .conftest import LOOPS, run_in_new_loop

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

NODE_TIMEOUT = 0.05
TTL = 2
"""Seconds. Short, so the chunk timeout (a tenth of the ttl, 0.2 s) keeps the bulk calls quick."""
LONG_TTL = 5
"""Seconds, for the leases used after the faults: their validity must outlast the calls before."""
RENEWED_TTL = 0.6
"""Seconds, for the auto-renewed lease: renewed every 0.4 s, so one renewal happens during the
``wait_lost`` of a test with one faulty master, and the lease expires soon with two."""
WAIT = 0.4
CLAIMED = ["claim:a", "claim:b", "claim:c"]
NAMES = ["bulk:a", "bulk:b", "bulk:c"]
FENCED_NAMES = ["fenced:a", "fenced:b", "fenced:c"]
LOST_LIMIT = 3.0
"""Longest wait for the lost signal of the renewed lease (five of its ttls)."""
WARM_UP_TRIES = 20
CLEANED_WITHIN = 2.0
"""How long the background clean-up of a cancelled call may take on the masters that answer."""
HEALED_CLEANED_WITHIN = 3.0
"""The same on the paused master once it is resumed (its retries back off up to 1 s)."""

FAULT_SETS = [("silent",), ("paused",), ("blackhole",), ("paused", "blackhole"), ("silent", "paused")]
"""The threaded test's sets, and a master that cannot be connected to beside one that stops
answering on its open connection."""
ON_UVLOOP = ("blackhole",) if "uvloop" in LOOPS else ()
"""The set run on uvloop instead of asyncio's loop (a black-holed and a paused master look the
same to the client, so asyncio's loop still meets that fault)."""


@pytest.fixture(scope="module")
def second() -> Iterator[RedisServer]:
    """The second healthy master (the first is the session's ``redis_server``)."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def behind_proxy() -> Iterator[RedisServer]:
    """The server a black-holed master's proxy fronts: a server of its own, so the three masters
    stay three independent servers."""
    with RedisServer() as server:
        yield server


@pytest.fixture(params=FAULT_SETS,
                ids=["+".join(kinds) + ("-uvloop" if kinds == ON_UVLOOP else "") for kinds in FAULT_SETS])
def faulty(request: pytest.FixtureRequest, behind_proxy: RedisServer) -> Iterator[list[Fault]]:
    """One or two faulty masters of the kinds in the parameter; healed and stopped at the end."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(open_fault(kind, lambda: request.getfixturevalue("own_server"),
                                              lambda: behind_proxy))
               for kind in request.param]


# -- helpers --------------------------------------------------------------------------------------


async def _warm_up(client: AsyncRedlockClient) -> None:
    """One successful call against the masters that answer: their connections are open after it
    (a silent master's never opens; it is faulty from the start)."""
    for _ in range(WARM_UP_TRIES):
        try:
            info = await client.query("warm-up")
        except QuorumError:
            await asyncio.sleep(0.01)  # a connection took longer than the node timeout to open
            continue
        assert info.held is False
        return
    raise AssertionError(f"no quorum answered {WARM_UP_TRIES} warm-up queries before the faults")


def _no_quorum(error: BaseException | None) -> bool:
    return isinstance(error, QuorumError)


async def _timed_against_expiry(watch: Stopwatch, label: str, lease: RedlockLease,
                                call: Callable[[], Awaitable[Any]]) -> Outcome:
    """Run ``call`` with, as its budget, the time until the last expiry ``lease`` believed in
    before it was found lost (polled every 2 ms while the call runs)."""
    believed = lease.expires_at

    async def poll() -> None:
        nonlocal believed
        while not lease.is_lost:
            believed = lease.expires_at
            await asyncio.sleep(0.002)

    poller = asyncio.ensure_future(poll())
    started = time.monotonic()
    result: object = None
    error: BaseException | None = None
    try:
        result = await call()
    except Exception as exc:
        error = exc
    finally:
        elapsed = time.monotonic() - started
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
    outcome = Outcome(label, elapsed, max(0.0, believed - started), result, error)
    watch.outcomes.append(outcome)
    if outcome.over:
        watch.problems.append(f"over budget (the lease's believed expiry): {outcome.describe()}")
    return outcome


# -- every public call, timed ---------------------------------------------------------------------


async def _every_call(faulty: list[Fault], healthy: list[RedisServer], core_name: str,
                      key_prefix: str) -> Stopwatch:
    urls = [fault.url for fault in faulty] + [server.url for server in healthy]
    client = AsyncRedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix)
    single = NODE_TIMEOUT
    chunk = client.chunk_timeout_for(TTL * 1000)
    quorum = len(healthy) >= client.quorum
    watch = Stopwatch()
    closed = False
    try:
        # Before the faults (a silent master is faulty from the start; two masters still answer):
        # warm connections, and leases and a held Lock object to use afterwards.
        await _warm_up(client)
        to_release = await client.try_acquire("rel", TTL)
        to_extend = await client.try_acquire("ext", LONG_TTL)
        many_release = (await client.acquire_many([f"mr:{i}" for i in range(3)], TTL)).acquired
        many_extend = (await client.acquire_many([f"me:{i}" for i in range(3)], LONG_TTL)).acquired
        held = client.lock("held", LONG_TTL)
        renewed = await client.try_acquire("renewed", RENEWED_TTL, auto_renew=True)
        assert to_release is not None and to_extend is not None and renewed is not None
        assert len(many_release) == len(many_extend) == 3
        assert await held.acquire(blocking=False) is True
        for fault in faulty:
            fault.inject()

        def expect(ok: bool, what: str) -> None:
            """Whether the last call (``out``) did what it should."""
            watch.expect(out, ok, what)

        # -- the renewed lease, watched while every other call runs --
        if quorum:
            # Longer than the renewed ttl: a quorum answers, so it is renewed and never lost.
            lost_wait = RENEWED_TTL + 0.1
            watching = asyncio.ensure_future(watch.arun(
                f"wait_lost(timeout={lost_wait:g}), beside the calls below", lost_wait,
                lambda: client.wait_lost(renewed, lost_wait)))
        else:
            watching = asyncio.ensure_future(_timed_against_expiry(
                watch, f"wait_lost(timeout={LOST_LIMIT:g}) with no quorum, beside the calls below", renewed,
                lambda: client.wait_lost(renewed, LOST_LIMIT)))

        # -- the client's single-lock calls --
        out = await watch.arun("try_acquire", single, lambda: client.try_acquire("t", TTL))
        if quorum:
            expect(isinstance(out.result, RedlockLease), "returned a lease (a quorum answers)")
        else:
            expect(_no_quorum(out.error), "raised QuorumError")

        out = await watch.arun("acquire(blocking=False)", single,
                               lambda: client.acquire("nb", TTL, blocking=False))
        status = getattr(out.result, "status", None)
        expect(status is (RedlockStatus.ACQUIRED if quorum else RedlockStatus.NO_QUORUM),
               "returned ACQUIRED" if quorum else "returned NO_QUORUM")

        out = await watch.arun("query", single, lambda: client.query("t"))
        expect(out.error is None if quorum else _no_quorum(out.error),
               "returned" if quorum else "raised QuorumError")

        out = await watch.arun("check", single, lambda: client.check(to_extend))
        expect(isinstance(out.result, float) if quorum else _no_quorum(out.error),
               "returned the seconds left" if quorum else "raised QuorumError")

        out = await watch.arun("release", single, lambda: client.release(to_release))
        expect(out.result is True if quorum else _no_quorum(out.error),
               "returned True" if quorum else "raised QuorumError")

        out = await watch.arun("extend", single, lambda: client.extend(to_extend, LONG_TTL))
        expect(out.result is True if quorum else out.result is False or _no_quorum(out.error),
               "returned True" if quorum else "raised QuorumError (or returned False)")

        out = await watch.arun(f"acquire(timeout={WAIT})", WAIT,
                               lambda: client.acquire("w", TTL, timeout=WAIT))
        status = getattr(out.result, "status", None)
        expect(out.error is None and (status is RedlockStatus.ACQUIRED if quorum else status is not None),
               "returned ACQUIRED" if quorum else "returned a result")

        # -- bulk calls --
        out = await watch.arun("acquire_many", chunk, lambda: client.acquire_many(NAMES, TTL))
        expect(out.error is None, "returned")
        if quorum:
            expect(len(getattr(out.result, "acquired", [])) == len(NAMES), "acquired every name")

        out = await watch.arun("acquire_many(limit=2)", chunk,
                               lambda: client.acquire_many(CLAIMED, TTL, limit=2))
        expect(out.error is None, "returned")
        if quorum:
            expect(len(getattr(out.result, "acquired", [])) == 2, "acquired two names")

        out = await watch.arun("try_acquire(fenced=True)", single,
                               lambda: client.try_acquire("tf", TTL, fenced=True))
        if quorum:
            expect(getattr(out.result, "fences", None) is not None, "returned a fenced lease")
        else:
            expect(_no_quorum(out.error), "raised QuorumError")

        out = await watch.arun("acquire_many(fenced=True)", chunk,
                               lambda: client.acquire_many(FENCED_NAMES, TTL, fenced=True))
        expect(out.error is None, "returned")
        if quorum:
            expect(len(getattr(out.result, "acquired", [])) == len(FENCED_NAMES), "acquired every name")

        out = await watch.arun("release_many", chunk, lambda: client.release_many(many_release))
        expect(out.result == [True] * 3 if quorum else isinstance(out.error, ConnectionError),
               "returned [True, True, True]" if quorum else "raised QuorumError")

        out = await watch.arun("extend_many", chunk, lambda: client.extend_many(many_extend, TTL))
        expect(out.result == [True] * 3 if quorum else isinstance(out.error, ConnectionError)
               or out.result == [False] * 3, "returned [True, True, True]" if quorum
               else "raised QuorumError (or returned [False, False, False])")

        # -- a Lock object held from before the faults --
        out = await watch.arun("AsyncRedlockLock.owned()", single, held.owned)
        expect(out.result is True if quorum else _no_quorum(out.error),
               "returned True" if quorum else "raised QuorumError")

        out = await watch.arun("AsyncRedlockLock.remaining()", single, held.remaining)
        expect(isinstance(out.result, float) and out.result > 0 if quorum else _no_quorum(out.error),
               "returned the seconds left" if quorum else "raised QuorumError")

        out = await watch.arun("AsyncRedlockLock.locked()", single, held.locked)
        expect(out.result is True if quorum else _no_quorum(out.error),
               "returned True" if quorum else "raised QuorumError")

        out = await watch.arun("AsyncRedlockLock.extend()", single, held.extend)
        expect(out.result is True if quorum else isinstance(out.error, QuorumError | LockNotOwnedError),
               "returned True" if quorum else "raised QuorumError (or LockNotOwnedError)")

        out = await watch.arun("AsyncRedlockLock.release()", single, held.release)
        expect(out.error is None if quorum else _no_quorum(out.error),
               "returned" if quorum else "raised QuorumError")

        # -- Lock objects taken after the faults --
        lock = client.lock("obj", TTL, timeout=WAIT)
        out = await watch.arun(f"AsyncRedlockLock(timeout={WAIT}).acquire()", WAIT, lock.acquire)
        expect(out.result is True if quorum else _no_quorum(out.error),
               "returned True" if quorum else "raised QuorumError")
        if out.result is True:
            out = await watch.arun("AsyncRedlockLock.release() (taken after the faults)", single,
                                   lock.release)
            expect(out.error is None, "returned")

        lock = client.lock("nb-obj", TTL)
        out = await watch.arun("AsyncRedlockLock.acquire(blocking=False)", single,
                               lambda: lock.acquire(blocking=False))
        expect(out.result is True if quorum else _no_quorum(out.error),
               "returned True" if quorum else "raised QuorumError")

        async def with_block() -> None:
            async with client.lock("with", TTL, timeout=WAIT):
                pass

        # Entering waits up to WAIT; leaving releases, one more attempt on the masters.
        out = await watch.arun(f"async with client.lock(timeout={WAIT})", WAIT + single, with_block)
        expect(out.error is None if quorum else isinstance(out.error, QuorumError | LockNotAcquiredError),
               "returned" if quorum else "raised QuorumError (or LockNotAcquiredError)")

        out = await watching
        if quorum:
            watch.expect(out, out.result is False and not renewed.is_lost,
                         "returned False, the lease still renewed")
        else:
            watch.expect(out, out.result is True, "returned True (the lease is lost by its expiry)")

        # -- close: the renewed lease released (a chunk), one try at what may still be held --
        close_budget = client.chunk_timeout_for(int(RENEWED_TTL * 1000)) + single
        closed = True
        out = await watch.arun("close", close_budget, client.close)
        expect(out.error is None, "returned")
    finally:
        for fault in faulty:
            fault.heal()
        if not closed:
            await client.close()
    return watch


def test_async_redlock_calls_keep_their_deadline(faulty: list[Fault], redis_server: RedisServer,
                                                 second: RedisServer, core_name: str,
                                                 key_prefix: str) -> None:
    healthy = [redis_server, second][: 3 - len(faulty)]
    loop = "uvloop" if tuple(fault.kind for fault in faulty) == ON_UVLOOP else "asyncio"
    run_in_new_loop(loop, lambda: _every_call(faulty, healthy, core_name, key_prefix)).check()


# -- cancelled mid-call ---------------------------------------------------------------------------

ACQUIRE_CUTS = [0.0005, 0.002, 0.01, 0.03]
"""``asyncio.wait_for`` timeouts around one acquire: before, while and after the healthy masters
answered, all well inside the paused master's node timeout (50 ms)."""
BULK_CUTS = [0.002, 0.01, 0.03]
BULK_SIZE = 50
SURELY_SENT = 0.01
"""A call cut this late must have sent its SETs to the healthy masters (else it proves nothing)."""


def _keys_left(raws: list[redis.Redis], keys: list[str]) -> list[int]:
    return [int(raw.exists(*keys)) for raw in raws]


def _sets_run(raws: list[redis.Redis]) -> list[int]:
    """How many SET commands each server has run (``INFO commandstats``)."""
    return [int(raw.info("commandstats").get("cmdstat_set", {}).get("calls", 0)) for raw in raws]


async def _gone(raws: list[redis.Redis], keys: list[str], seconds: float) -> bool:
    """Whether none of ``keys`` is left on any of ``raws`` within ``seconds``; polled every 5 ms
    while the loop runs (the clean-up is a task of this loop)."""
    end = time.monotonic() + seconds
    while any(_keys_left(raws, keys)):
        if time.monotonic() > end:
            return False
        await asyncio.sleep(0.005)
    return True


def test_a_cancelled_call_leaves_no_lock_once_cleaned_up(own_server: RedisServer, redis_server: RedisServer,
                                                         second: RedisServer, core_name: str,
                                                         key_prefix: str) -> None:
    """One master SIGSTOPped: acquire, acquire_many and acquire_many(limit=...) are cut by
    ``asyncio.wait_for`` while they wait for it, after the healthy masters took their keys (their
    SET counts show it). What they took there is released by the background clean-up within
    ``CLEANED_WITHIN``, with no further call; and on the paused master too once it is resumed
    (it runs the SETs it had queued, then the releases queued behind them)."""
    healthy_raws = [redis.Redis(host=s.host, port=s.port) for s in (redis_server, second)]
    paused_raw = redis.Redis(host=own_server.host, port=own_server.port)
    left: list[str] = []
    vacuous: list[str] = []
    every_key: list[str] = []

    async def cancel(label: str, keys: list[str], call: Callable[[], Awaitable[Any]], after: float) -> None:
        label = f"{label} cut by wait_for({after:g})"
        every_key.extend(keys)
        sets_before = _sets_run(healthy_raws)
        started = time.monotonic()
        try:
            await asyncio.wait_for(call(), after)
        except asyncio.TimeoutError:
            was_cut = True
        else:
            was_cut = False
        elapsed = time.monotonic() - started
        if not await _gone(healthy_raws, keys, CLEANED_WITHIN):
            left.append(f"{label} after {elapsed:.4f}s: {_keys_left(healthy_raws, keys)} of its {len(keys)} "
                        f"keys still on the two healthy masters {CLEANED_WITHIN}s later")
        sent = min(now - then for now, then in zip(_sets_run(healthy_raws), sets_before, strict=True))
        if after >= SURELY_SENT and not (was_cut and sent > 0):
            vacuous.append(f"{label}: {'cut' if was_cut else 'finished'} after {elapsed:.4f}s, "
                           f"{sent} SETs run on each healthy master")

    async def body() -> None:
        client = AsyncRedlockClient([own_server.url, redis_server.url, second.url], node_timeout=NODE_TIMEOUT,
                                    core=core_name, key_prefix=key_prefix)
        try:
            await _warm_up(client)
            with paused(own_server):
                for after in ACQUIRE_CUTS:
                    name = f"one:{after:g}"
                    await cancel("acquire", [key_prefix + name],
                                 functools.partial(client.acquire, name, LONG_TTL), after)
                for after in BULK_CUTS:
                    names = [f"many:{after:g}:{i}" for i in range(BULK_SIZE)]
                    await cancel("acquire_many", [key_prefix + n for n in names],
                                 functools.partial(client.acquire_many, names, LONG_TTL), after)
                    names = [f"claim:{after:g}:{i}" for i in range(BULK_SIZE)]
                    await cancel("acquire_many(limit=5)", [key_prefix + n for n in names],
                                 functools.partial(client.acquire_many, names, LONG_TTL, limit=5), after)
            if not await _gone([paused_raw], every_key, HEALED_CLEANED_WITHIN):
                left.append(f"{_keys_left([paused_raw], every_key)[0]} keys of the cut calls still on the "
                            f"paused master {HEALED_CLEANED_WITHIN}s after it was resumed")
        finally:
            await client.close()

    try:
        run_in_new_loop("asyncio", body)
    finally:
        for raw in [*healthy_raws, paused_raw]:
            raw.close()
    assert not vacuous, ("calls cut this late should have been cut after their SETs ran on the healthy "
                         "masters (the paused one holds each for 50 ms):\n- " + "\n- ".join(vacuous))
    assert not left, "a cancelled call left locks behind:\n- " + "\n- ".join(left)
