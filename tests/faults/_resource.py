"""The resource the locks protect: one counter per lock on the resource server, in a hash's
``value`` field, read and written plainly or through a ``FencedStore`` with the lease's fence."""

from __future__ import annotations

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from turbolock import FencedStore, Lease, StaleFenceError


class Resource:
    def __init__(self, url: str, fenced: bool) -> None:
        # No retries: a command redis-py sent again could be applied twice, and the resource
        # server is never faulted, so any error here is the harness's, raised as it is.
        self.raw = redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0))
        self.fenced = fenced
        self._store = FencedStore(self.raw)

    def read(self, key: str, lease: Lease) -> int | None:
        """The counter, or None when a fenced read was refused (a newer fence has read it)."""
        if not self.fenced:
            return int(self.raw.hget(key, "value") or 0)
        assert lease.fence is not None
        try:
            return int(self._store.read(key, lease.fence) or 0)
        except StaleFenceError:
            return None

    def write(self, key: str, value: int, lease: Lease) -> bool:
        """Whether the resource applied the write (a fenced one may be refused)."""
        if not self.fenced:
            self.raw.hset(key, "value", value)
            return True
        assert lease.fence is not None
        return self._store.write(key, value, lease.fence)

    def close(self) -> None:
        self.raw.close()
