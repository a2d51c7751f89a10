"""What the blocking and the asyncio clients share for one lock: reading a reply into a result.

Sans-IO: each client sends with its own executor; these functions turn the reply (or the
``Unconfirmed`` failure of a write without reply) into the result or the error.
"""

from __future__ import annotations

from typing import Any

from . import _scripts
from ._executor import Unconfirmed
from .errors import OutcomeUnknownError
from .lease import Lease, LockInfo, info_from_pttl


def _error(reply: object, name: str | bytes) -> Exception:
    from .client import _reply_error

    return _reply_error(reply, name)


def release_result(reply: object, lease: Lease) -> bool:
    if type(reply) is int:
        return reply == 1
    raise _error(reply, lease.name)


def release_unconfirmed(client: Any, lease: Lease, exc: Unconfirmed) -> BaseException:
    """The release may not have run: it is remembered for a retry; the error to raise."""
    client._remember_cleanup(lease.key, lease.token, lease.expires_at)
    if not isinstance(exc.cause, Exception):
        return exc.cause
    return OutcomeUnknownError(
        f"release of lock {lease.name!r} may not have happened ({exc}); it will be retried", [lease.name])


def extend_result(client: Any, reply: object, lease: Lease, ttl_ms: int, sent_at: float) -> bool:
    """True when extended: the lease then counts its new ttl from ``sent_at``."""
    if type(reply) is not int:
        raise _error(reply, lease.name)
    if reply != 1:
        return False
    lease.ttl_ms = ttl_ms
    lease.acquired_at = sent_at
    if lease.renewal is not None:
        client._renewer().rescheduled(lease)
    return True


def extend_unconfirmed(lease: Lease, exc: Unconfirmed) -> BaseException:
    if not isinstance(exc.cause, Exception):
        return exc.cause
    return OutcomeUnknownError(f"extend of lock {lease.name!r} may not have happened ({exc})", [lease.name])


def check_result(reply: object, lease: Lease) -> float | None:
    """Seconds left when the lease still holds the lock, else None."""
    if type(reply) is not int:
        raise _error(reply, lease.name)
    if reply == _scripts.NOT_OURS or reply == -2:
        return None
    return info_from_pttl(reply).remaining


def query_result(reply: object, name: str | bytes) -> LockInfo:
    if type(reply) is int:
        return info_from_pttl(reply)
    raise _error(reply, name)
