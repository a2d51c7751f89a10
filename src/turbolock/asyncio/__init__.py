"""turbolock for asyncio: ``AsyncLockClient`` and ``AsyncLock`` for one server,
``AsyncSentinelLockClient`` for a master Sentinel names, ``AsyncClusterLockClient`` for Redis
Cluster, ``AsyncRedlockClient`` and
``AsyncRedlockLock`` for a majority of masters; ``AsyncFencedStore``, the resource's half of
fencing, through ``redis.asyncio``.

The whole API of the threaded clients as coroutines, on the same sans-IO core and the same
flows, with automatic pipelining: the commands of every task issued in one loop iteration leave
in one write. Leases, results and errors are the threaded clients' own types
(``turbolock.Lease``, ``turbolock.AcquireManyResult``, ``turbolock.RedlockResult``...).
"""

from __future__ import annotations

from turbolock.asyncio.client import DEFAULT_MAX_CONNECTIONS, AsyncLockClient
from turbolock.asyncio.cluster import AsyncClusterLockClient
from turbolock.asyncio.fencing import AsyncFencedStore
from turbolock.asyncio.lock import AsyncLock
from turbolock.asyncio.redlock import AsyncRedlockClient, AsyncRedlockLock
from turbolock.asyncio.sentinel import AsyncSentinelLockClient

__all__ = ["DEFAULT_MAX_CONNECTIONS", "AsyncClusterLockClient", "AsyncFencedStore", "AsyncLock",
           "AsyncLockClient", "AsyncRedlockClient", "AsyncRedlockLock", "AsyncSentinelLockClient"]
