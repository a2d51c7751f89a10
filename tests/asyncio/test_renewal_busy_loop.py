"""asyncio auto-renewal on a busy (not blocked) event loop: a task runs CPU-bound slices back to
back, yielding between them, so every loop iteration takes one slice. A renewal round takes
several iterations (its wake-up, its task, the write, the reply, each await), each a slice late;
the renewer measures how late its wake-ups are and starts rounds that much earlier
(``Renewer.lead``). Before, a lock of 0.5 s ttl on a loop of 20 ms iterations was reported lost
(and released) on the C core while the server answered at once. A round still needs its
iterations: the ttl must cover two rounds and a wake-up (0.3 s at 20 ms still fails: README,
asyncio)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from async_helpers import NewClient, Runner

from turbolock import AutoRenew, Lease

pytestmark = pytest.mark.timing  # CPU-bound slices: scripts/test runs these on their own


@pytest.mark.parametrize(("ttl", "iteration"), [(0.5, 0.02), (2.0, 0.1)], ids=["ttl0.5s-20ms", "ttl2s-100ms"])
def test_a_renewed_lock_survives_a_busy_loop(arun_asyncio: Runner, new_client: NewClient, raw: redis.Redis,
                                             ttl: float, iteration: float) -> None:
    async def body() -> None:
        async with new_client() as client:
            lost: list[Lease] = []
            lease = await client.try_acquire("busy", ttl, auto_renew=True, on_lost=lost.append)
            assert lease is not None
            key = client.key_prefix + b"busy"
            stop = time.monotonic() + 4.0
            gone = False
            while time.monotonic() < stop:
                end = time.monotonic() + iteration
                while time.monotonic() < end:  # the slice: CPU-bound, the loop waits for it
                    pass
                gone = gone or raw.get(key) != lease.token
                await asyncio.sleep(0)
            assert lost == [] and not lease.is_lost, f"reported lost: {lease.lost_reason}"
            assert not gone, "the key expired or was released meanwhile"
            assert await client.release(lease)

    arun_asyncio(body)


def _scripts_run(raw: redis.Redis) -> int:
    stats = raw.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval"))


def test_a_loop_blocked_once_is_not_a_busy_loop(arun_asyncio: Runner, new_client: NewClient,
                                               raw: redis.Redis) -> None:
    """A loop blocked once for a second (a slow synchronous call) is one late wake-up, not a busy
    loop: the lead is the median of recent wake-ups, so renewals go on at their usual rate (a
    3 s lock: about two in 4 s) and ``max_renewals`` is not spent at once. With the lag taken as
    the largest recent wake-up, one such second made 16 renewals in the next 4 s, and a lock
    allowed four renewals (held about 11 s) was lost at 5.8 s."""
    async def body() -> None:
        async with new_client() as client:
            lease = await client.try_acquire("blocked-once", 3.0, auto_renew=True)
            capped = await client.try_acquire("capped", 3.0, auto_renew=AutoRenew(max_renewals=4))
            assert lease is not None and capped is not None
            await asyncio.sleep(0.3)
            time.sleep(1.0)  # the loop blocked once
            before = _scripts_run(raw)
            await asyncio.sleep(4.5)  # t = 5.8 s: each renewed at about 2 and 4 s
            renewals = _scripts_run(raw) - before
            assert renewals <= 8, f"{renewals} renewal scripts in 4.5 s for two locks of 3 s ttl"
            assert not capped.is_lost and capped.valid_for() > 0.5, "max_renewals spent early"
            assert await client.release(lease) and await client.release(capped)

    arun_asyncio(body)
