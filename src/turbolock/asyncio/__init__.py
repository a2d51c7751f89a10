"""turbolock for asyncio: ``AsyncLockClient`` and ``AsyncLock``, on the same sans-IO core.

The whole API of ``LockClient`` as coroutines, with automatic pipelining: the commands of every
task issued in one loop iteration leave in one write. Leases, results and errors are the
blocking client's own types (``turbolock.Lease``, ``turbolock.AcquireManyResult``...).
"""

from __future__ import annotations

from .client import DEFAULT_MAX_CONNECTIONS, AsyncLockClient
from .lock import AsyncLock

__all__ = ["DEFAULT_MAX_CONNECTIONS", "AsyncLock", "AsyncLockClient"]
