"""``extend_many`` of an auto-renewed lease that a concurrent ``release`` settles first returns
or raises a LockError. It raised a bare ``OverflowError`` out of the renewer's rescheduling
(found in review).

The extend runs on the server before the release (its reply says 1), but its task settles after
the release's: the NOSCRIPT retry waits through ``asyncio.wait``, one more loop hop than the
release's plain await, so when both replies come in one read the release settles first and
marks the lease released (``expires_at`` = -inf); ``RenewalBook.rescheduled`` then computed
``int(-inf * 1000)``. An empty script cache (a server restart, SCRIPT FLUSH, a first use) is all
it takes. Here a proxy delays what the client sends and a paused server makes both retries'
replies leave in one write, so it happens every time.
"""

from __future__ import annotations

import asyncio

import redis
from async_helpers import Runner

from _netfaults import FaultProxy
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


def test_extend_many_with_a_concurrent_release_returns_or_raises_a_lock_error(
        arun: Runner, own_server: RedisServer, own_raw: redis.Redis, core_name: str) -> None:
    with FaultProxy(own_server.host, own_server.port) as proxy:
        async def body() -> None:
            async with AsyncLockClient.from_url(proxy.url, core=core_name, timeout=5) as client:
                lease = await client.try_acquire("a", 30, auto_renew=True)
                assert lease is not None
                own_raw.script_flush()  # as after a server restart: every script answers NOSCRIPT once
                proxy.delay(0.5, to_client=False)  # what the client writes reaches the server 0.5 s later
                extending = asyncio.ensure_future(client.extend_many([lease], 40))
                releasing = asyncio.ensure_future(client.release(lease))
                # t=0.5: both NOSCRIPT; the extend's retry, then the release's, are written at once
                await asyncio.sleep(0.8)
                own_server.pause()  # t=0.8..1.4: both retries reach the server while it is stopped
                try:
                    await asyncio.sleep(0.6)
                finally:
                    own_server.resume()  # it reads both at once: their replies come in one read
                proxy.heal()
                extended, released = await asyncio.gather(extending, releasing, return_exceptions=True)
                assert released is True
                assert not isinstance(extended, BaseException), f"extend_many raised {extended!r}"

        arun(body)
