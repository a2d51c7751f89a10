"""Every call of ``LockClient`` keeps its deadline against a server that stops answering.

The promise: with ``timeout=T`` (and ``connect_timeout=T``), each call returns or raises within
T plus a small constant (``SLACK``), the call right after a failed one too (no clean-up of the
earlier failure is run on top of it), and ``close()`` as well. A call that fails raises a
``turbolock.ConnectionError`` subclass: ``TimeoutError``, or ``AcquireOutcomeUnknownError`` /
``OutcomeUnknownError`` when a write went out. A blocking ``Lock`` acquire keeps its own wait
timeout W: with W < T it ends by W, with W > T it keeps trying until W and returns False.

Each fault kind (a silent server, a SIGSTOPped redis-server, a black-holed proxy, see
``tests/_netfaults.py``) runs a whole sequence of calls, each timed; a test reports every call
that broke its budget at once, with the elapsed times.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from _netfaults import Fault, Stopwatch
from turbolock import ConnectionError, Lease, LockClient, LockNotAcquiredError

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

T = 0.3
"""The client's call timeout (and connect timeout) in these tests."""
TTL = 10
NAMES = ["bulk:a", "bulk:b", "bulk:c"]


def _client(fault: Fault, core_name: str, key_prefix: str, timeout: float = T) -> LockClient:
    return LockClient.from_url(fault.url, core=core_name, key_prefix=key_prefix, timeout=timeout,
                               connect_timeout=timeout)


def _take(client: LockClient, name: str) -> Lease:
    lease = client.try_acquire(name, TTL)
    assert lease is not None, f"could not take {name!r} before the fault"
    return lease


def _fails(watch: Stopwatch, label: str, call: Callable[[], object], budget: float = T) -> None:
    """Time ``call``; it must raise a turbolock.ConnectionError subclass within its budget."""
    outcome = watch.run(label, budget, call)
    watch.expect_raises(outcome, ConnectionError)


def test_single_lock_calls_keep_their_deadline(fault: Fault, core_name: str, key_prefix: str) -> None:
    """try_acquire, query, release, extend, check and close(), one after the other: each call
    after a failed one is also "the next call" (after a lost acquire, after a lost release)."""
    client = _client(fault, core_name, key_prefix)
    watch = Stopwatch()
    try:
        leases: dict[str, Lease] = {}
        if fault.warm:
            for name in ("rel", "ext", "chk"):
                leases[name] = _take(client, name)  # also a warm connection before the fault
            fault.inject()
        _fails(watch, "try_acquire", lambda: client.try_acquire("t", TTL))
        _fails(watch, "try_acquire(fenced=True)", lambda: client.try_acquire("tf", TTL, fenced=True))
        _fails(watch, "query (after a lost acquire)", lambda: client.query("q"))
        if leases:
            _fails(watch, "release", lambda: client.release(leases["rel"]))
            _fails(watch, "extend (after a lost release)", lambda: client.extend(leases["ext"], TTL))
            _fails(watch, "check", lambda: client.check(leases["chk"]))
        closed = watch.run("close", T, client.close)
        watch.expect(closed, closed.error is None, "returned")
    finally:
        fault.heal()
        client.close()
    watch.check()


def test_bulk_calls_keep_their_deadline(fault: Fault, core_name: str, key_prefix: str) -> None:
    """acquire_many, query_many, release_many, extend_many and close(), one after the other."""
    client = _client(fault, core_name, key_prefix)
    watch = Stopwatch()
    try:
        to_release: list[Lease] = []
        to_extend: list[Lease] = []
        if fault.warm:
            to_release = client.acquire_many([f"rel:{i}" for i in range(3)], TTL).acquired
            to_extend = client.acquire_many([f"ext:{i}" for i in range(3)], TTL).acquired
            assert len(to_release) == len(to_extend) == 3
            fault.inject()
        _fails(watch, "acquire_many", lambda: client.acquire_many(NAMES, TTL))
        _fails(watch, "acquire_many(fenced=True)", lambda: client.acquire_many(NAMES, TTL, fenced=True))
        _fails(watch, "query_many (after a lost acquire_many)", lambda: client.query_many(NAMES))
        _fails(watch, "acquire_many(limit=2)", lambda: client.acquire_many(NAMES, TTL, limit=2))
        _fails(watch, "acquire_many(limit=2, fenced=True)",
               lambda: client.acquire_many(NAMES, TTL, limit=2, fenced=True))
        if to_release:
            _fails(watch, "release_many", lambda: client.release_many(to_release))
            _fails(watch, "extend_many (after a lost release_many)",
                   lambda: client.extend_many(to_extend, TTL))
        closed = watch.run("close", T, client.close)
        watch.expect(closed, closed.error is None, "returned")
    finally:
        fault.heal()
        client.close()
    watch.check()


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_wait_shorter_than_the_call_timeout_is_kept(fault: Fault, core_name: str, key_prefix: str,
                                                      fair: bool) -> None:
    """Client timeout 1 s, Lock wait 0.3 s: acquire() ends by 0.3 s (False or a ConnectionError),
    and a ``with`` block raises by then."""
    wait = 0.3
    client = _client(fault, core_name, key_prefix, timeout=1.0)
    watch = Stopwatch()
    try:
        if fault.warm:
            assert client.query("warm-up").held is False
            fault.inject()
        lock = client.lock("z", 5, timeout=wait, fair=fair)
        outcome = watch.run("Lock.acquire() with timeout=0.3", wait, lock.acquire)
        watch.expect(outcome, outcome.result is False or isinstance(outcome.error, ConnectionError),
                     "returned False or raised a ConnectionError")

        def with_block() -> None:
            with client.lock("w", 5, timeout=wait, fair=fair):
                pass

        outcome = watch.run("with client.lock(timeout=0.3)", wait, with_block)
        watch.expect_raises(outcome, LockNotAcquiredError, ConnectionError)
        closed = watch.run("close", 1.0, client.close)
        watch.expect(closed, closed.error is None, "returned")
    finally:
        fault.heal()
        client.close()
    watch.check()


@pytest.mark.parametrize("fault", ["silent"], indirect=True)
@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_wait_longer_than_the_call_timeout_keeps_trying(fault: Fault, core_name: str,
                                                          key_prefix: str, fair: bool) -> None:
    """Client timeout 0.3 s, Lock wait 0.8 s: a lost reply does not end the wait (no
    AcquireOutcomeUnknownError at the first one); every attempt fails, so acquire() returns
    False, and a ``with`` block raises LockNotAcquiredError, both by 0.8 s and not before the
    last attempt had its chance (0.8 - 0.3 s)."""
    wait = 0.8
    client = _client(fault, core_name, key_prefix)
    watch = Stopwatch()
    try:
        if fault.warm:
            assert client.query("warm-up").held is False
            fault.inject()
        lock = client.lock("z", 5, timeout=wait, fair=fair)
        outcome = watch.run("Lock.acquire() with timeout=0.8", wait, lock.acquire)
        watch.expect(outcome, outcome.error is None and outcome.result is False, "returned False")
        watch.expect(outcome, outcome.elapsed >= wait - T, f"kept trying for at least {wait - T:.1f}s")

        def with_block() -> None:
            with client.lock("w", 5, timeout=wait, fair=fair):
                pass

        outcome = watch.run("with client.lock(timeout=0.8)", wait, with_block)
        watch.expect_raises(outcome, LockNotAcquiredError)
        watch.expect(outcome, outcome.elapsed >= wait - T, f"kept trying for at least {wait - T:.1f}s")
    finally:
        fault.heal()
        client.close()
    watch.check()
