"""Every call of ``RedlockClient`` keeps its deadline when one or two of its three masters stop
answering (a silent server, a SIGSTOPped redis-server, a black-holed proxy).

A Redlock call writes to every master before reading any reply, each master with its own node
timeout, so one call costs about one node timeout, not one per master. The promise: a
single-lock call (try_acquire, acquire(blocking=False), release, extend, query) ends within
``node_timeout`` + ``SLACK`` per attempt; ``acquire(timeout=W)`` within W + ``SLACK``; a bulk
call (acquire_many, release_many, extend_many) within the chunk timeout
(``chunk_timeout_for(ttl_ms)``) + ``SLACK``. With one faulty master the quorum stands and the
calls succeed; with two they fail with ``QuorumError`` (a ``turbolock.ConnectionError``) or say
NO_QUORUM.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from _netfaults import Fault, Stopwatch, open_fault
from turbolock import ConnectionError, QuorumError, RedlockClient, RedlockLease, RedlockStatus
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

NODE_TIMEOUT = 0.05
TTL = 2
"""Seconds. Short, so the chunk timeout (a tenth of the ttl, 0.2 s) keeps the bulk calls quick."""
LONG_TTL = 5
"""Seconds, for the leases extended after the faults: their validity must outlast the calls before."""
WAIT = 0.4
CLAIMED = ["claim:a", "claim:b", "claim:c"]
NAMES = ["bulk:a", "bulk:b", "bulk:c"]
FENCED_NAMES = ["fenced:a", "fenced:b", "fenced:c"]

FAULT_SETS = [("silent",), ("paused",), ("blackhole",), ("paused", "blackhole")]


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


@pytest.fixture(params=FAULT_SETS, ids=["+".join(kinds) for kinds in FAULT_SETS])
def faulty(request: pytest.FixtureRequest, behind_proxy: RedisServer) -> Iterator[list[Fault]]:
    """One or two faulty masters of the kinds in the parameter; healed and stopped at the end."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(open_fault(kind, lambda: request.getfixturevalue("own_server"),
                                              lambda: behind_proxy))
               for kind in request.param]


def test_redlock_calls_keep_their_deadline(faulty: list[Fault], redis_server: RedisServer,
                                           second: RedisServer, core_name: str, key_prefix: str) -> None:
    healthy = [redis_server, second][: 3 - len(faulty)]
    urls = [fault.url for fault in faulty] + [server.url for server in healthy]
    client = RedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix)
    single = NODE_TIMEOUT
    chunk = client.chunk_timeout_for(TTL * 1000)
    quorum = len(healthy) >= client.quorum
    watch = Stopwatch()
    try:
        # Before the faults (a silent master is faulty from the start; two masters still answer):
        # warm connections, and leases to release and extend afterwards.
        to_release = client.try_acquire("rel", TTL)
        to_extend = client.try_acquire("ext", LONG_TTL)
        many_release = client.acquire_many([f"mr:{i}" for i in range(3)], TTL).acquired
        many_extend = client.acquire_many([f"me:{i}" for i in range(3)], LONG_TTL).acquired
        assert to_release is not None and to_extend is not None
        assert len(many_release) == len(many_extend) == 3
        for fault in faulty:
            fault.inject()

        def expect(outcome_ok: bool, what: str) -> None:
            watch.expect(watch.outcomes[-1], outcome_ok, what)

        def no_quorum(outcome_error: BaseException | None) -> bool:
            return isinstance(outcome_error, QuorumError)

        out = watch.run("try_acquire", single, lambda: client.try_acquire("t", TTL))
        if quorum:
            expect(isinstance(out.result, RedlockLease), "returned a lease (a quorum answers)")
        else:
            expect(no_quorum(out.error), "raised QuorumError")

        out = watch.run("acquire(blocking=False)", single, lambda: client.acquire("nb", TTL, blocking=False))
        status = getattr(out.result, "status", None)
        expect(status is (RedlockStatus.ACQUIRED if quorum else RedlockStatus.NO_QUORUM),
               "returned ACQUIRED" if quorum else "returned NO_QUORUM")

        out = watch.run("query", single, lambda: client.query("t"))
        expect(out.error is None if quorum else no_quorum(out.error),
               "returned" if quorum else "raised QuorumError")

        out = watch.run("check", single, lambda: client.check(to_extend))
        expect(out.error is None if quorum else no_quorum(out.error),
               "returned" if quorum else "raised QuorumError")

        out = watch.run("release", single, lambda: client.release(to_release))
        expect(out.result is True if quorum else no_quorum(out.error),
               "returned True" if quorum else "raised QuorumError")

        out = watch.run("extend", single, lambda: client.extend(to_extend, TTL))
        expect(out.result is True if quorum else out.result is False or no_quorum(out.error),
               "returned True" if quorum else "raised QuorumError (or returned False)")

        out = watch.run(f"acquire(timeout={WAIT})", WAIT, lambda: client.acquire("w", TTL, timeout=WAIT))
        status = getattr(out.result, "status", None)
        expect(out.error is None and (status is RedlockStatus.ACQUIRED if quorum else status is not None),
               "returned ACQUIRED" if quorum else "returned a result")

        out = watch.run("acquire_many", chunk, lambda: client.acquire_many(NAMES, TTL))
        expect(out.error is None, "returned")
        if quorum:
            expect(len(getattr(out.result, "acquired", [])) == len(NAMES), "acquired every name")

        out = watch.run("acquire_many(limit=2)", chunk, lambda: client.acquire_many(CLAIMED, TTL, limit=2))
        expect(out.error is None, "returned")

        out = watch.run("try_acquire(fenced=True)", single,
                        lambda: client.try_acquire("tf", TTL, fenced=True))
        if quorum:
            expect(getattr(out.result, "fences", None) is not None, "returned a fenced lease")
        else:
            expect(no_quorum(out.error), "raised QuorumError")

        out = watch.run("acquire_many(fenced=True)", chunk,
                        lambda: client.acquire_many(FENCED_NAMES, TTL, fenced=True))
        expect(out.error is None, "returned")
        if quorum:
            expect(len(getattr(out.result, "acquired", [])) == len(FENCED_NAMES), "acquired every name")

        out = watch.run("release_many", chunk, lambda: client.release_many(many_release))
        expect(out.result == [True] * 3 if quorum else isinstance(out.error, ConnectionError),
               "returned [True, True, True]" if quorum else "raised QuorumError")

        out = watch.run("extend_many", chunk, lambda: client.extend_many(many_extend, TTL))
        expect(out.result == [True] * 3 if quorum else isinstance(out.error, ConnectionError)
               or out.result == [False] * 3, "returned [True, True, True]" if quorum
               else "raised QuorumError (or returned [False, False, False])")
    finally:
        for fault in faulty:
            fault.heal()
        client.close()
    watch.check()
