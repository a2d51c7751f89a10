"""Auto-renewal of Redlocks on a thread: the single-server renewer's thread and timer wheel,
each round being ``redlock_renewal``'s, renewing on a majority of the masters."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from turbolock._flows.redlock_renewal import extensions_used_up, renew_round_flow
from turbolock._flows.renewal_book import RenewalBook
from turbolock._sync.drive import run
from turbolock._sync.renewer import Renewer
from turbolock.lease import Lease

if TYPE_CHECKING:
    from turbolock.redlock import RedlockClient


class RedlockRenewer(Renewer):
    """The renewal thread of one ``RedlockClient``; started on the first auto-renewed lease."""

    def __init__(self, client: RedlockClient) -> None:
        super().__init__(client, RenewalBook(client.core, time.monotonic(), extensions_used_up))
        self._redlock = client

    def _send(self, leases: list[Lease]) -> None:
        run(renew_round_flow(self._redlock, self, leases))
