"""``close()`` keeps its one call deadline on both fronts when the server stops answering with
auto-renewed locks held: it stops renewing, tries to release them and gives up by the deadline
(they expire by their ttl). (The asyncio client's release of its renewed locks at close is now
bound to close()'s deadline as the threaded one's is; before, the first chunk's own timeout
happened to end it about as soon, so this test passes on that code too.)"""

from __future__ import annotations

import time
from functools import partial

import pytest

from _blocking_async import FRONTS, Fronts
from turbolock import LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # close() against its deadline

T = 0.5


@pytest.mark.parametrize("front", FRONTS)
def test_close_keeps_its_deadline_when_the_server_stops_answering(own_server: RedisServer, core_name: str,
                                                                  key_prefix: str, front: str) -> None:
    fronts = Fronts(front, partial(LockClient.from_url, own_server.url),
                    partial(AsyncLockClient.from_url, own_server.url), core=core_name, key_prefix=key_prefix)
    client = fronts.make(timeout=T, connect_timeout=T)
    result = client.acquire_many([f"renewed:{i}" for i in range(3000)], 30, auto_renew=True)
    assert len(result.acquired) == 3000
    own_server.pause()
    try:
        started = time.monotonic()
        client.close()
        took = time.monotonic() - started
    finally:
        own_server.resume()
    assert took < T + 0.4, f"close() took {took:.2f}s against its {T}s deadline"
