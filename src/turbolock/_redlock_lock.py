"""``RedlockLock``: the object API over one Redlock name, for ``with`` blocks, decorators and
explicit calls, shaped like the single-server ``Lock``.

Ownership belongs to the object (it holds the lease and its token), never to a thread.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from ._redlock_result import RedlockLease, RedlockResult, RedlockStatus
from ._validate import Seconds, check_token, encode_name, timeout_seconds
from .errors import (
    InvalidArgumentTypeError,
    LockLostError,
    LockNotOwnedError,
    LockUsageError,
    QuorumError,
    RedlockNotAcquiredError,
)
from .renewal import AutoRenew, OnLost

if TYPE_CHECKING:
    from .redlock import RedlockClient

P = ParamSpec("P")
R = TypeVar("R")


class RedlockLock:
    """One Redlock name with a ttl and a default way to wait.

    ``blocking=False`` or ``timeout=0`` makes one attempt; otherwise the client's retry count
    and ``timeout`` (None: the retry count alone) bound the wait.
    """

    def __init__(self, client: RedlockClient, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                 timeout: Seconds | None = None, token: bytes | None = None,
                 auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                 max_extensions: int | None = None) -> None:
        encode_name(name)
        ms, _, node_timeout = client._ttl(ttl)
        client._renew_policy(auto_renew, on_lost, ms, node_timeout)
        if not isinstance(blocking, bool):
            raise InvalidArgumentTypeError("blocking", "must be True or False")
        self._timeout = timeout_seconds(timeout)
        if token is not None:
            check_token(token)
        client._extension_limit(max_extensions)
        self.client = client
        self.name = name
        self.ttl = ttl
        self.blocking = blocking
        self.timeout = timeout
        self._token = token
        self.auto_renew = auto_renew
        self.on_lost = on_lost
        self.max_extensions = max_extensions
        self._lease: RedlockLease | None = None
        self._result: RedlockResult | None = None
        self._released = False
        self._state_lock = threading.Lock()

    @property
    def lease(self) -> RedlockLease | None:
        """The current lease, or None when this object does not hold the lock."""
        return self._lease

    @property
    def result(self) -> RedlockResult | None:
        """The last acquire's result (status, per-instance counts, attempts), None before one."""
        return self._result

    @property
    def status(self) -> RedlockStatus | None:
        """Acquired or Expired while a lease is held, Unlocked once released, else the last
        acquire's status (None before any)."""
        lease = self._lease
        if lease is not None:
            return lease.status
        if self._released:
            return RedlockStatus.UNLOCKED
        return None if self._result is None else self._result.status

    def acquire(self, blocking: bool | None = None, timeout: Seconds | None = None) -> bool:
        """Take the lock: True when taken, False when it stayed held elsewhere (or ran out of
        validity) through every attempt. ``QuorumError`` when too many masters failed to answer."""
        if blocking is None:
            blocking = self.blocking
        with self._state_lock:
            if self._lease is not None:
                raise LockUsageError(f"lock {self.name!r} is already held by this RedlockLock object")
        result = self.client.acquire(
            self.name, self.ttl, blocking=blocking, timeout=self.timeout if timeout is None else timeout,
            token=self._token, auto_renew=self.auto_renew, on_lost=self.on_lost,
            max_extensions=self.max_extensions)
        with self._state_lock:
            self._result = result
            self._lease = result.lease
            self._released = False
        if result.status is RedlockStatus.NO_QUORUM:
            raise QuorumError(f"could not reach a quorum for {result.describe()}", [self.name], result)
        return result.lease is not None

    def _take_lease(self) -> RedlockLease:
        with self._state_lock:
            lease = self._lease
        if lease is None:
            raise LockUsageError(f"lock {self.name!r} is not held by this RedlockLock object")
        return lease

    def release(self) -> None:
        """Release on every master. ``LockNotOwnedError`` when it was no longer ours on a majority."""
        lease = self._take_lease()
        with self._state_lock:
            self._lease = None
            self._released = True
        if not self.client.release(lease):
            raise LockNotOwnedError(
                f"lock {self.name!r} was no longer held on a majority of masters when released")

    def extend(self, ttl: Seconds | None = None) -> None:
        """Reset the ttl (to ``ttl``, or the lock's own) from now on a majority.
        ``LockNotOwnedError`` when that failed; ``ExtensionLimitError`` past ``max_extensions``."""
        lease = self._take_lease()
        if not self.client.extend(lease, self.ttl if ttl is None else ttl):
            with self._state_lock:
                if self._lease is lease:
                    self._lease = None
            raise LockNotOwnedError(
                f"lock {self.name!r} is no longer held on a majority of masters; it was not extended")

    def valid_for(self) -> float:
        """Seconds of Redlock validity left (0 when not held or lost); no round trip."""
        lease = self._lease
        return 0.0 if lease is None else lease.valid_for()

    def ensure_held(self) -> None:
        """``LockLostError`` unless this object holds the lock with validity left; no round trip."""
        lease = self._lease
        if lease is None:
            raise LockLostError(f"lock {self.name!r} is not held by this RedlockLock object")
        lease.ensure_held()

    @property
    def lost(self) -> threading.Event:
        """Set when the current lease is found lost (auto-renewed locks are watched)."""
        return self._take_lease().lost

    def __enter__(self) -> RedlockLock:
        if not self.acquire():
            result = self._result
            waited = f" within {self._timeout:g}s" if self.blocking and self._timeout is not None else ""
            detail = result.describe() if result is not None else f"lock {self.name!r}"
            raise RedlockNotAcquiredError(f"not acquired{waited}: {detail}", result)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._lease is None:
            return
        try:
            self.release()
        except LockNotOwnedError:
            if exc_type is None:
                raise

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Decorator: each call runs holding a fresh RedlockLock with this one's settings."""

        @functools.wraps(func)
        def locked_call(*args: P.args, **kwargs: P.kwargs) -> R:
            with self.copy():
                return func(*args, **kwargs)

        return locked_call

    def copy(self) -> RedlockLock:
        """A new, unheld RedlockLock with the same settings."""
        return RedlockLock(self.client, self.name, self.ttl, blocking=self.blocking, timeout=self.timeout,
                           token=self._token, auto_renew=self.auto_renew, on_lost=self.on_lost,
                           max_extensions=self.max_extensions)

    def __repr__(self) -> str:
        status = self.status
        return (f"RedlockLock(name={self.name!r}, ttl={self.ttl!r}, "
                f"status={None if status is None else status.value!r})")
