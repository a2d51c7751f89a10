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

from ._lock_rules import LockState
from ._redlock_result import RedlockLease, RedlockResult, RedlockStatus
from ._validate import Seconds
from .errors import LockNotOwnedError, QuorumError, RedlockNotAcquiredError
from .renewal import AutoRenew, OnLost

if TYPE_CHECKING:
    from .redlock import RedlockClient

P = ParamSpec("P")
R = TypeVar("R")


class RedlockLock(LockState[RedlockLease]):
    """One Redlock name with a ttl and a default way to wait, with the behaviour of every Lock
    object (see ``_lock_rules``): ``timeout=None`` waits until the lock is taken, ``timeout=0``
    or ``blocking=False`` makes one attempt."""

    kind = "RedlockLock"

    def __init__(self, client: RedlockClient, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                 timeout: Seconds | None = None, token: bytes | None = None,
                 auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                 max_extensions: int | None = None) -> None:
        self._setup(name, ttl, blocking, timeout, token, auto_renew, on_lost)
        ms, _, node_timeout = client._ttl(ttl)
        client._renew_policy(auto_renew, on_lost, ms, node_timeout)
        client._extension_limit(max_extensions)
        self.client = client
        self.max_extensions = max_extensions
        self._result: RedlockResult | None = None
        self._released = False
        self._state_lock = threading.Lock()

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
        validity) until the wait ended. ``QuorumError`` when too many masters failed to answer."""
        wait = self._wait_for(blocking, timeout)
        with self._state_lock:
            self._check_unheld()
        result = self.client.acquire(
            self.name, self.ttl, blocking=wait != 0.0, timeout=wait or None, token=self._token,
            auto_renew=self.auto_renew, on_lost=self.on_lost, max_extensions=self.max_extensions)
        with self._state_lock:
            self._result = result
            self._lease = result.lease
            self._released = False
        if result.status is RedlockStatus.NO_QUORUM:
            raise QuorumError(f"could not reach a quorum for {result.describe()}", [self.name], result)
        return result.lease is not None

    def release(self) -> None:
        """Release on every master. ``LockNotOwnedError`` when it was no longer ours on a majority."""
        with self._state_lock:
            lease = self._held_lease()
            self._lease = None
            self._released = True
        if not self.client.release(lease):
            raise LockNotOwnedError(
                f"lock {self.name!r} was no longer held on a majority of masters when released",
                names=[self.name])

    def extend(self, ttl: Seconds | None = None, *, additive: bool = False) -> bool:
        """Reset the ttl (to ``ttl``, or the lock's own) from now on a majority: True. With
        ``additive=True``, add ``ttl`` to the validity left. ``LockNotOwnedError`` when that
        failed; ``ExtensionLimitError`` past ``max_extensions``."""
        lease = self._held_lease()
        if not self.client.extend(lease, self.ttl if ttl is None else ttl, additive=additive):
            with self._state_lock:
                self._drop(lease)
            raise LockNotOwnedError(
                f"lock {self.name!r} is no longer held on a majority of masters; it was not extended",
                names=[self.name])
        return True

    def owned(self) -> bool:
        """Whether a majority of masters still holds the lock for this object (asks them)."""
        lease = self._lease
        return lease is not None and self.client.check(lease) is not None

    def remaining(self) -> float:
        """Seconds before the lock may expire on a majority if this object holds it, else 0."""
        lease = self._lease
        if lease is None:
            return 0.0
        left = self.client.check(lease)
        return 0.0 if left is None else left

    def locked(self) -> bool:
        """Whether anyone at all holds the lock on a majority of masters (asks them)."""
        return self.client.query(self.name).held

    @property
    def lost(self) -> threading.Event:
        """Set when the current lease is found lost (auto-renewed locks are watched)."""
        return self._held_lease().lost

    def __enter__(self) -> RedlockLock:
        if not self.acquire():
            result = self._result
            wait = self._wait
            waited = f" within {wait:g}s" if wait else ""
            detail = result.describe() if result is not None else f"lock {self.name!r}"
            raise RedlockNotAcquiredError(f"not acquired{waited}: {detail}", result, names=[self.name])
        self._entered = self._lease
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._exit_check(exc_type):
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
        return RedlockLock(self.client, self.name, self.ttl, max_extensions=self.max_extensions,
                           **self._settings())

    def __repr__(self) -> str:
        status = self.status
        return (f"RedlockLock(name={self.name!r}, ttl={self.ttl!r}, "
                f"status={None if status is None else status.value!r})")
