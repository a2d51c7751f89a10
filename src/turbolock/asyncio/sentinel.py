"""``AsyncSentinelLockClient``: ``SentinelLockClient`` for asyncio, the master found through the
Sentinels and followed across a failover; everything else is ``AsyncLockClient``'s."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from turbolock._aio.pool import ConnectionPool
from turbolock._aio.sentinel import SentinelExecutor, SentinelNodes, SentinelPool
from turbolock._flows.client_settings import DEFAULT_CHUNK_SIZE, DEFAULT_KEY_PREFIX
from turbolock._flows.sentinel_routes import SentinelRoutes, SentinelRules
from turbolock.asyncio.client import DEFAULT_MAX_CONNECTIONS, AsyncLockClient


class AsyncSentinelLockClient(SentinelRules, AsyncLockClient):
    """A lock client for the master Sentinel names ``service_name``, for asyncio; share one per
    event loop. Arguments as ``SentinelLockClient``'s; connections as ``AsyncLockClient``'s."""

    def __init__(self, sentinels: Sequence[str | tuple[str, int]], service_name: str, *,
                 sentinel_username: str | None = None, sentinel_password: str | None = None,
                 key_prefix: str | bytes = DEFAULT_KEY_PREFIX, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, core: str | None = None, **connection: Any) -> None:
        host, port = self._take_sentinels(sentinels, service_name, sentinel_username, sentinel_password,
                                           connection)
        super().__init__(host, port, key_prefix=key_prefix, max_connections=max_connections,
                         chunk_size=chunk_size, core=core, **connection)

    def _open(self, max_connections: int) -> None:
        routes = SentinelRoutes(self._service, self._sentinel_addresses)
        self._sentinels = SentinelNodes(self._sentinel_options(), self.core)
        self._pool = SentinelPool(self.options, self.core, self.key_prefix, max_connections, self._on_orphan,
                                  routes, self._sentinels)
        self._pool.on_new_loop = self._follow_running_loop
        self._exec = self._direct = SentinelExecutor(self._pool, self._chunk_size)
        self._wakes_waiters = self.options.wake_waiters  # the subscriber follows the master (the pool's)

    async def _close_connections(self, deadline: float = -math.inf) -> None:
        await self._pool.close(deadline)
        await self._sentinels.close()

    def _connection_pools(self) -> list[ConnectionPool]:
        return [self._pool, *self._sentinels.pools()]
