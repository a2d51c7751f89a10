"""Auto-renewal of Redlocks in a task: the asyncio renewer's task and timer wheel, each round
being ``redlock_renewal``'s, renewing on a majority of the masters."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from turbolock._aio.drive import run
from turbolock._aio.renewer import Renewer
from turbolock._flows.redlock_renewal import extensions_used_up, renew_round_flow
from turbolock._flows.renewal_book import RenewalBook
from turbolock.lease import Lease

if TYPE_CHECKING:
    from turbolock.asyncio.redlock import AsyncRedlockClient


class AsyncRedlockRenewer(Renewer):
    """The renewal task of one ``AsyncRedlockClient``; started on the first auto-renewed lease."""

    def __init__(self, client: AsyncRedlockClient) -> None:
        super().__init__(client, RenewalBook(client.core, time.monotonic(), extensions_used_up))  # type: ignore[arg-type]
        self._redlock = client

    async def _send(self, leases: list[Lease]) -> None:
        redlock: Any = self._redlock
        await run(renew_round_flow(redlock, self, leases))
