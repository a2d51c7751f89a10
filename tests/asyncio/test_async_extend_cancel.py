"""An asyncio extend_many cancelled at any point, while its calls are settled as they answer.

Whatever the point of the cancel, no lease believes more time than its key has on the server,
and no lease is left with a command counted in flight (its belief would be stuck at the minimum)."""

from __future__ import annotations

import asyncio
import time

import redis
from async_helpers import NewClient, Runner


def test_a_cancelled_extend_many_never_believes_more_than_the_server_has(arun: Runner, new_client: NewClient,
                                                                         raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client() as client:
            leases = (await client.acquire_many([f"xc:{i}" for i in range(12_000)], 5)).acquired
            started = time.monotonic()
            assert await client.extend_many(leases, 6) == [True] * len(leases)
            took = time.monotonic() - started
            for step in range(8):
                task = asyncio.ensure_future(client.extend_many(leases, 60 + step))
                await asyncio.sleep(took * step / 8)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                await asyncio.sleep(0.3)  # every reply in
                pipe = raw.pipeline(transaction=False)
                for lease in leases:
                    pipe.pttl(client.key_prefix + lease.key)
                server = [p / 1000.0 for p in pipe.execute()]
                now = time.monotonic()  # after every PTTL was read: each one was read before now
                over = [i for i, lease in enumerate(leases)
                        if lease.expires_at - now > server[i] + 0.05]
                assert not over, f"step {step}: {len(over)} leases believe more than the server has"
                assert all(lease._flight is None for lease in leases), f"step {step}: flights left"
            await client.release_many(leases)

    arun(body)
