"""asyncio twin of tests/test_close_during_auto_renewed_acquire.py (Redlock): ``close()`` awaited
in another task while an auto-renewed acquire waits for a paused master, on a client whose
renewer had not started. The acquire must not start one on the closed client (leases
"auto-renewed" but never renewed, a renewer task left behind): it raises ``ClientClosedError``,
and nothing is renewing. (The one-server asyncio client cannot get there: its close() ends the
acquire's connection, and the acquire raises ``AcquireOutcomeUnknownError``.)"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from turbolock import ClientClosedError
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

HELD_BACK = 0.5


async def _close_meanwhile(acquire: Callable[[], Awaitable[object]],
                           close: Callable[[], Awaitable[None]]) -> BaseException | object:
    task = asyncio.ensure_future(acquire())
    await asyncio.sleep(HELD_BACK / 5)
    await close()
    try:
        return await asyncio.wait_for(task, 10)
    except ClientClosedError as exc:
        return exc


def _acquire(client: Any, op: str) -> Callable[[], Awaitable[object]]:
    if op == "try_acquire":
        return lambda: client.try_acquire("job", 5, auto_renew=True)
    return lambda: client.acquire_many(["job"], 5, auto_renew=True)


@pytest.mark.parametrize("op", ["try_acquire", "acquire_many"])
def test_redlock(own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str,
                 op: str) -> None:
    servers = own_masters(3)

    async def main() -> None:
        client = AsyncRedlockClient([server.url for server in servers], node_timeout=HELD_BACK,
                                    core=core_name, key_prefix=key_prefix)
        assert (await client.query("warm-up")).held is False
        servers[2].pause()  # the acquire waits one node timeout for it: close() comes meanwhile
        try:
            outcome = await _close_meanwhile(_acquire(client, op), client.close)
        finally:
            servers[2].resume()
        assert isinstance(outcome, ClientClosedError), outcome
        assert client.renewing == 0 and client._renewer_instance is None

    asyncio.run(main())
