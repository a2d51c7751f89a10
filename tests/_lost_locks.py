"""An ``on_lost`` callback for tests: records the names of the leases reported lost."""

from __future__ import annotations

import threading

from turbolock.lease import Lease


class LostLocks:
    def __init__(self) -> None:
        self.names: list[str | bytes] = []
        self._lock = threading.Lock()

    def __call__(self, lease: Lease) -> None:
        with self._lock:
            self.names.append(lease.name)


class MarkedBeforeSignal:
    """An ``on_lost`` callback counting, at each call, how many of ``leases`` are marked lost:
    ``seen[0] == len(leases)`` when all were marked before the first was signalled."""

    def __init__(self) -> None:
        self.leases: list[Lease] = []
        self.seen: list[int] = []

    def __call__(self, lease: Lease) -> None:
        self.seen.append(sum(held.is_lost for held in self.leases))
