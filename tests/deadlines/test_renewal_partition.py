"""Auto-renewal in a network partition: the lost signal comes no later than the lease's own expiry.

An auto-renewed lease (ttl 1 s) is taken through a proxy that then black-holes every connection
(``tests/_netfaults.py``): no renewal can succeed. The lease believes it holds the lock until
``lease.expires_at``; past that moment another client may hold it, so the holder must have been
told (``lease.lost`` set, ``on_lost`` called, ``wait_lost`` returned) by then. The test polls
``lease.expires_at`` every couple of milliseconds until the signal, and checks the signal came
at most ``EARLY_ENOUGH`` after the last expiry the lease believed in.

Two client timeouts: a short one (0.15 s, below the default renew_before of ttl/3), and the
default 5 s, longer than the whole ttl (a renewal call must not be allowed to outlive the
lease); a client that refuses that configuration is skipped, saying so.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from _netfaults import FaultProxy
from turbolock import InvalidArgumentError, Lease, LockClient
from turbolock.asyncio import AsyncLockClient

from .conftest import Runner

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

TTL = 1
EARLY_ENOUGH = 0.02
"""How long after the believed expiry the signal may come (polling and scheduling noise)."""
POLL = 0.002
LIMIT = 3.0
"""Longest wait for the signal (three ttls)."""
TIMEOUTS = [0.15, None]
TIMEOUT_IDS = ["timeout-0.15", "timeout-default"]


def _options(timeout: float | None) -> dict[str, Any]:
    return {} if timeout is None else {"timeout": timeout, "connect_timeout": timeout}


def _verdict(fired_at: float | None, believed: float, acquired_at: float, signalled: bool) -> None:
    assert signalled, f"the lost signal never came within {LIMIT}s of the black-hole"
    assert fired_at is not None, "lease.lost was set but on_lost was never called"
    late = fired_at - believed
    assert late <= EARLY_ENOUGH, (
        f"the lost signal came {late:+.3f}s after the expiry the lease believed in "
        f"({fired_at - acquired_at:.3f}s after the acquire; believed expiry {believed - acquired_at:.3f}s; "
        f"budget: the expiry + {EARLY_ENOUGH}s)")


@pytest.mark.parametrize("timeout", TIMEOUTS, ids=TIMEOUT_IDS)
def test_lost_is_signalled_by_the_believed_expiry(proxy: FaultProxy, core_name: str, key_prefix: str,
                                                  timeout: float | None) -> None:
    client = LockClient.from_url(proxy.url, core=core_name, key_prefix=key_prefix, **_options(timeout))
    fired: list[float] = []

    def on_lost(lease: Lease) -> None:
        fired.append(time.monotonic())

    try:
        try:
            lease = client.try_acquire("renewed", TTL, auto_renew=True, on_lost=on_lost)
        except InvalidArgumentError as exc:
            pytest.skip(f"the client refuses auto-renewal of a {TTL}s lease with this timeout: {exc}")
        assert lease is not None
        acquired_at = lease.acquired_at
        proxy.blackhole()
        believed = lease.expires_at
        limit = time.monotonic() + LIMIT
        while time.monotonic() < limit:
            expires_at = lease.expires_at
            if lease.lost.is_set():
                break
            believed = expires_at
            time.sleep(POLL)
        seen_at = time.monotonic()
        signalled = lease.lost.is_set()
        if signalled and not fired:
            time.sleep(0.05)  # on_lost runs right after the event is set, on the renewer's thread
        _verdict(fired[0] if fired else (seen_at if signalled else None), believed, acquired_at, signalled)
    finally:
        proxy.heal()
        client.close()


@pytest.mark.parametrize("timeout", TIMEOUTS, ids=TIMEOUT_IDS)
def test_async_lost_is_signalled_by_the_believed_expiry(arun_asyncio: Runner, proxy: FaultProxy,
                                                        core_name: str, key_prefix: str,
                                                        timeout: float | None) -> None:
    fired: list[float] = []

    def on_lost(lease: Lease) -> None:
        fired.append(time.monotonic())

    async def body() -> None:
        client = AsyncLockClient.from_url(proxy.url, core=core_name, key_prefix=key_prefix,
                                          **_options(timeout))
        try:
            try:
                lease = await client.try_acquire("renewed", TTL, auto_renew=True, on_lost=on_lost)
            except InvalidArgumentError as exc:
                pytest.skip(f"the client refuses auto-renewal of a {TTL}s lease with this timeout: {exc}")
            assert lease is not None
            acquired_at = lease.acquired_at
            proxy.blackhole()
            believed = lease.expires_at

            async def poll() -> None:
                nonlocal believed
                while not lease.is_lost:
                    believed = lease.expires_at
                    await asyncio.sleep(POLL)

            poller = asyncio.ensure_future(poll())
            try:
                signalled = await client.wait_lost(lease, LIMIT)
                returned_at = time.monotonic()
            finally:
                poller.cancel()
                await asyncio.gather(poller, return_exceptions=True)
            if signalled and not fired:
                await asyncio.sleep(0.05)
            _verdict(min(fired[0], returned_at) if fired else (returned_at if signalled else None),
                     believed, acquired_at, signalled)
        finally:
            proxy.heal()
            await client.close()

    arun_asyncio(body)
