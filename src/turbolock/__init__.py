"""turbolock: fast distributed locks on Redis.

``LockClient`` takes, extends, releases and queries locks, one at a time or thousands per
call; ``client.lock(name, ttl)`` gives a ``Lock`` for ``with`` blocks and decorators.
"""

from __future__ import annotations

import logging

from turbolock._flows.bulk_plan import MAX_BULK
from turbolock._flows.bulk_result import AcquireManyResult
from turbolock._flows.renewal_book import AutoRenew
from turbolock._redlock.lock import RedlockLock
from turbolock._wire import core as _core
from turbolock._wire.validate import MAX_NAME_BYTES, MAX_TTL_MS, MIN_TOKEN_BYTES
from turbolock.client import LockClient
from turbolock.cluster import ClusterLockClient
from turbolock.errors import (
    AcquireOutcomeUnknownError,
    AuthenticationError,
    ClientClosedError,
    ClusterError,
    ConnectionError,
    ExtensionLimitError,
    FencedWriteError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockError,
    LockLostError,
    LockNotAcquiredError,
    LockNotOwnedError,
    LockUsageError,
    NotDurableError,
    OutcomeUnknownError,
    ProtocolError,
    QuorumError,
    RedlockNotAcquiredError,
    ResponseError,
    SlotMovingError,
    StaleFenceError,
    TimeoutError,
    UnsentTimeoutError,
)
from turbolock.fencing import FencedStore
from turbolock.lease import FencedLease, Lease, LockInfo
from turbolock.lock import Lock
from turbolock.options import ConnectionOptions
from turbolock.redlock import (
    FencedRedlockLease,
    InstanceSummary,
    RedlockClient,
    RedlockLease,
    RedlockManyResult,
    RedlockResult,
    RedlockStatus,
)
from turbolock.sentinel import SentinelLockClient

implementation: str = str(_core.default_core.IMPLEMENTATION)
"""The core in use by default: "c" (compiled, over hiredis) or "py" (pure Python)."""

__version__ = "0.1.0"

# A library logs; the application decides where that goes.
logging.getLogger("turbolock").addHandler(logging.NullHandler())

__all__ = [
    "MAX_BULK",
    "MAX_NAME_BYTES",
    "MAX_TTL_MS",
    "MIN_TOKEN_BYTES",
    "AcquireManyResult",
    "AcquireOutcomeUnknownError",
    "AuthenticationError",
    "AutoRenew",
    "ClientClosedError",
    "ClusterError",
    "ClusterLockClient",
    "ConnectionError",
    "ConnectionOptions",
    "ExtensionLimitError",
    "FencedLease",
    "FencedRedlockLease",
    "FencedStore",
    "FencedWriteError",
    "InstanceSummary",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "Lease",
    "Lock",
    "LockClient",
    "LockError",
    "LockInfo",
    "LockLostError",
    "LockNotAcquiredError",
    "LockNotOwnedError",
    "LockUsageError",
    "NotDurableError",
    "OutcomeUnknownError",
    "ProtocolError",
    "QuorumError",
    "RedlockClient",
    "RedlockLease",
    "RedlockLock",
    "RedlockManyResult",
    "RedlockNotAcquiredError",
    "RedlockResult",
    "RedlockStatus",
    "ResponseError",
    "SentinelLockClient",
    "SlotMovingError",
    "StaleFenceError",
    "TimeoutError",
    "UnsentTimeoutError",
    "implementation",
]
