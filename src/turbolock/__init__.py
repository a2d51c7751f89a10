"""turbolock: fast distributed locks on Redis.

``LockClient`` takes, extends, releases and queries locks, one at a time or thousands per
call; ``client.lock(name, ttl)`` gives a ``Lock`` for ``with`` blocks and decorators.
"""

from __future__ import annotations

import logging

from . import _core
from ._redlock_lock import RedlockLock
from ._validate import MAX_NAME_BYTES, MAX_TTL_MS, MIN_TOKEN_BYTES
from .bulk import MAX_BULK, AcquireManyResult
from .client import LockClient
from .errors import (
    AcquireOutcomeUnknownError,
    AuthenticationError,
    ConnectionError,
    ExtensionLimitError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockError,
    LockLostError,
    LockNotAcquiredError,
    LockNotOwnedError,
    LockUsageError,
    OutcomeUnknownError,
    ProtocolError,
    QuorumError,
    RedlockNotAcquiredError,
    ResponseError,
    TimeoutError,
)
from .lease import Lease, LockInfo
from .lock import Lock
from .options import ConnectionOptions
from .redlock import (
    InstanceSummary,
    RedlockClient,
    RedlockLease,
    RedlockManyResult,
    RedlockResult,
    RedlockStatus,
)
from .renewal import AutoRenew

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
    "ConnectionError",
    "ConnectionOptions",
    "ExtensionLimitError",
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
    "TimeoutError",
    "implementation",
]
