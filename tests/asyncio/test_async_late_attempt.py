"""An asyncio Lock object's attempt whose deadline has passed before it began (a wait that ended)
is not written: it was, took the lock on the server for nobody, and the orphan handler released
it again (EVALSHA + SPUBLISH, waking waiters for a lock nobody held). Found in review."""

from __future__ import annotations

import asyncio
import time

import redis
from async_helpers import Runner

from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


def test_an_attempt_past_its_deadline_is_not_written(arun: Runner, own_server: RedisServer,
                                                     own_raw: redis.Redis, core_name: str,
                                                     key_prefix: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as client:
            assert not (await client.query("warm-up")).held  # one pooled connection
            own_raw.config_resetstat()
            got = await client._attempt("late", 30, None, False, None, time.monotonic() - 0.001)
            assert got is None
            await asyncio.sleep(0.2)  # whatever was sent has been answered and settled by now
            calls = {name: stat["calls"] for name, stat in own_raw.info("commandstats").items()}
            assert own_raw.exists(key_prefix + "late") == 0
            assert "cmdstat_set" not in calls, f"the attempt was written after its deadline: {calls}"

    arun(body)
