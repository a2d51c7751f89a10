"""``Lock``: the object API over one lock name, for ``with`` blocks, decorators and explicit calls.

Ownership belongs to the Lock object (it holds the lease and its token), never to a thread:
a Lock acquired in one thread may be released in another. Settings, defaults and waiting are
``_lock_rules``'s, shared with the asyncio and Redlock Lock objects.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from ._lock_rules import LockState, Waiting, worth_retrying
from ._validate import Seconds
from .errors import ConnectionError, LockNotAcquiredError, LockNotOwnedError
from .lease import Lease
from .renewal import AutoRenew, OnLost

if TYPE_CHECKING:
    from .client import LockClient

P = ParamSpec("P")
R = TypeVar("R")


class Lock(LockState[Lease]):
    """One lock name on one client, with a ttl and a default way to wait.

    ``blocking=False`` or ``timeout=0`` makes one attempt; ``timeout=None`` waits until the lock
    is free. Each attempt keeps the client's call deadline, or what is left of the wait if that
    is shorter; an attempt whose reply was lost is released in the background and the wait goes on.
    """

    def __init__(self, client: LockClient, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                 timeout: Seconds | None = None, token: bytes | None = None,
                 auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None) -> None:
        self._setup(name, ttl, blocking, timeout, token, auto_renew, on_lost)
        client._renew_policy(auto_renew, on_lost, self._ttl_ms)
        self.client = client
        self._state_lock = threading.Lock()

    def acquire(self, blocking: bool | None = None, timeout: Seconds | None = None) -> bool:
        """Take the lock: True when taken, False when ``timeout`` passed first (or, with
        ``blocking=False``, when someone else holds it)."""
        wait = self._wait_for(blocking, timeout)
        with self._state_lock:
            self._check_unheld()
        client = self.client
        waiting = Waiting(wait)
        call_timeout = client.options.timeout
        while True:
            deadline = waiting.attempt_deadline(call_timeout)
            if deadline is None:
                deadline = time.monotonic() + call_timeout
            try:
                lease = client._try_acquire(self.name, self.ttl, self._token, self.auto_renew, self.on_lost,
                                            deadline)
            except ConnectionError as error:
                if not worth_retrying(error, wait):
                    raise
                lease = None  # a lock it may have taken is released in the background
            if lease is not None:
                with self._state_lock:
                    self._lease = lease
                return True
            pause = waiting.pause() if wait != 0.0 else None
            if pause is None:
                return False
            time.sleep(pause)

    def release(self) -> None:
        """Release the lock. ``LockNotOwnedError`` when it had already expired or been taken over."""
        with self._state_lock:
            lease = self._held_lease()
            self._lease = None
        if not self.client.release(lease):
            raise LockNotOwnedError(f"lock {self.name!r} was no longer held by this Lock when released",
                                    names=[self.name])

    def extend(self, ttl: Seconds | None = None, *, additive: bool = False) -> bool:
        """Reset the ttl (to ``ttl``, or the Lock's own) from now: True. With ``additive=True``,
        add ``ttl`` to what is left instead (redis-py's default). ``LockNotOwnedError`` when the
        lock is no longer ours (the Lock then holds nothing)."""
        lease = self._held_lease()
        if not self.client.extend(lease, self.ttl if ttl is None else ttl, additive=additive):
            with self._state_lock:
                self._drop(lease)
            raise LockNotOwnedError(f"lock {self.name!r} is no longer held by this Lock; it was not extended",
                                    names=[self.name])
        return True

    def owned(self) -> bool:
        """Whether the server still holds the lock for this Lock (asks the server)."""
        lease = self._lease
        return lease is not None and self.client.check(lease) is not None

    def remaining(self) -> float:
        """Seconds before the lock expires on the server if this Lock holds it, else 0."""
        lease = self._lease
        if lease is None:
            return 0.0
        left = self.client.check(lease)
        return 0.0 if left is None else left

    def locked(self) -> bool:
        """Whether anyone at all holds the lock (asks the server)."""
        return self.client.query(self.name).held

    @property
    def lost(self) -> threading.Event:
        """Set when the current lease is found lost (auto-renewed locks are watched)."""
        return self._held_lease().lost

    def __enter__(self) -> Lock:
        if not self.acquire():
            raise LockNotAcquiredError(self._not_acquired_message(), names=[self.name])
        self._entered = self._lease
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._exit_check(exc_type):
            return
        try:
            self.release()
        except LockNotOwnedError:
            # The block's own exception says more than the lost lock; report the loss only when
            # the block itself succeeded, so work done without the lock is never silent.
            if exc_type is None:
                raise

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Decorator: each call runs holding a fresh Lock with this one's settings."""

        @functools.wraps(func)
        def locked_call(*args: P.args, **kwargs: P.kwargs) -> R:
            with self.copy():
                return func(*args, **kwargs)

        return locked_call

    def copy(self) -> Lock:
        """A new, unheld Lock with the same settings."""
        return Lock(self.client, self.name, self.ttl, **self._settings())
