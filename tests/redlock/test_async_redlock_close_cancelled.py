"""An asyncio Redlock close() cancelled part-way (a shutdown's wait_for shorter than close's own
wait: here while it releases an auto-renewed lock on a stopped majority) closes the masters it
opened all the same, as the one-server client's does (README, ClientClosedError). It set
``closed`` and returned: the masters' connections and background releases stayed open, and a
second close() returned at once without closing them. Found in review."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer


@pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the client's closing: no core's own
def test_a_cancelled_close_still_closes_the_masters(own_masters: Callable[[int], list[RedisServer]],
                                                    core_name: str, key_prefix: str) -> None:
    servers = own_masters(3)

    async def scenario() -> list[str]:
        client = AsyncRedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                                    node_timeout=0.5)
        lease = await client.try_acquire("renewed", 30, auto_renew=True)
        assert lease is not None
        for server in servers[1:]:
            server.pause()  # close's release of the renewed lock waits on the stopped majority
        try:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.close(), 0.2)
        finally:
            for server in servers[1:]:
                server.resume()
        assert client.closed
        await client.close()  # again: nothing left to do
        await asyncio.sleep(0.05)  # the aborted masters' closing tasks
        return [master.options.address for master in client.masters
                if not master.closed or master._pool.connections or master._pool._retired]

    still_open = asyncio.run(scenario())
    assert not still_open, f"close() cancelled part-way left masters {still_open} open"
