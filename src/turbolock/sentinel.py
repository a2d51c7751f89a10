"""``SentinelLockClient``: locks on a master with replicas watched by Redis Sentinel, which the
client finds through the Sentinels and follows across a failover. Everything else is
``LockClient``'s: the same flows, Lock objects, bulk calls, auto-renewal and errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turbolock._flows.client_settings import DEFAULT_CHUNK_SIZE, DEFAULT_KEY_PREFIX
from turbolock._flows.renewal_book import COMMANDS_PER_WRITE
from turbolock._flows.sentinel_routes import SentinelRoutes, SentinelRules
from turbolock._sync.sentinel import SentinelExecutor, SentinelNodes, SentinelPool
from turbolock.client import DEFAULT_MAX_CONNECTIONS, LockClient


class SentinelLockClient(SentinelRules, LockClient):
    """A lock client for the master Sentinel names ``service_name``; thread-safe.

    ``sentinels``: URLs or ``(host, port)`` pairs, asked in turn for the master's address when
    a connection is to be opened and none is known. ``sentinel_username`` and
    ``sentinel_password`` are the Sentinels' own credentials; the other keywords (password, TLS,
    timeouts, db...) are the master's. After a failover, calls fail with ``ConnectionError``
    within their deadline until the Sentinels name the new master, then go there.
    """

    def __init__(self, sentinels: Sequence[str | tuple[str, int]], service_name: str, *,
                 sentinel_username: str | None = None, sentinel_password: str | None = None,
                 key_prefix: str | bytes = DEFAULT_KEY_PREFIX, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, core: str | None = None, **connection: Any) -> None:
        host, port = self._take_sentinels(sentinels, service_name, sentinel_username, sentinel_password,
                                           connection)
        super().__init__(host, port, key_prefix=key_prefix, max_connections=max_connections,
                         chunk_size=chunk_size, core=core, **connection)

    def _open(self, max_connections: int) -> None:
        options = self.options
        sentinel_options = self._sentinel_options()
        routes = SentinelRoutes(self._service, self._sentinel_addresses)
        self._sentinels = SentinelNodes(sentinel_options, self.core, options.timeout)
        self._pool = SentinelPool(options, self.core, self.key_prefix, max_connections, routes,
                                  self._sentinels)
        self._exec = SentinelExecutor(self._pool, options.timeout, self._chunk_size, self._on_orphan)
        self._exec_renewals = SentinelExecutor(self._pool, options.timeout, COMMANDS_PER_WRITE,
                                               self._on_orphan)
        self._wakes_waiters = options.wake_waiters  # the subscriber follows the master (the pool's)

    def _close_connections(self, deadline: float) -> None:
        self._pool.close(deadline)
        self._sentinels.close()
