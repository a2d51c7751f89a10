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

from turbolock import Lease

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
