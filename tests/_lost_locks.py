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
