"""asyncio twin of tests/redlock/test_redlock_granted_attempt_late_write.py: a Redlock granted
on two of three masters whose SET to the third was written but held back on the way, then
released. The release finds the third master free and the held-back SET lands after it: no lock
of nobody may stay there for the whole ttl (the asyncio client undoes it when the SET's late reply
comes, or by the release's rechecks 0.5 s and 2 s after the answer)."""

from __future__ import annotations

import asyncio

import pytest
import redis

from _eventually import eventually_async
from _netfaults import FaultProxy
from turbolock._flows import cleanup_book
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

HELD_BACK = 1.6  # past a bulk chunk's timeout (1 s at most) too
TTL = 60


def _sets(raw: redis.Redis) -> int:
    return int(raw.info("commandstats").get("cmdstat_set", {}).get("calls", 0))


@pytest.mark.parametrize("op", ["release", "release_many", "acquire_many"])
def test_a_granted_attempts_lost_write_on_one_master_is_released_again(
        three: list[RedisServer], third_proxy: FaultProxy, core_name: str, key_prefix: str, op: str) -> None:
    key = key_prefix + "seat"

    async def main() -> None:
        async with AsyncRedlockClient([three[0].url, three[1].url, third_proxy.url], core=core_name,
                                      key_prefix=key_prefix, node_timeout=0.3) as client:
            assert (await client.query("warm-up")).held is False  # every master's connection is open
            sets_before = _sets(third)
            third_proxy.delay(HELD_BACK, to_client=False)
            try:
                if op == "acquire_many":
                    lease = (await client.acquire_many(["seat"], TTL)).acquired[0]
                else:
                    lease = await client.try_acquire("seat", TTL)
            finally:
                third_proxy.heal()
            assert lease is not None and tuple(lease.instances) == (2, 0, 1)
            if op == "release":
                assert await client.release(lease) is True
            else:
                assert await client.release_many([lease]) == [True]
            # (the late SET may be undone at once: its reply, come after all, goes to the orphans)
            assert await eventually_async(lambda: _sets(third) > sets_before, HELD_BACK + 2), \
                "the held-back SET never reached the third master"
            rechecks = sum(cleanup_book.RECHECK_AFTER)
            assert await eventually_async(lambda: not third.exists(key), rechecks + 2), \
                f"the lost SET keeps the released lock on the third master ({third.pttl(key)} ms left)"

    with redis.Redis(port=three[2].port) as third:
        try:
            asyncio.run(main())
        finally:
            third.delete(key)
