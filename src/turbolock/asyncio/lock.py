"""``AsyncLock``: the object API over one lock name for asyncio: ``async with``, a decorator for
coroutines, and explicit calls.

Ownership belongs to the AsyncLock object (it holds the lease and its token), never to a task
or a thread: two tasks holding two AsyncLock objects on one name exclude each other, and one
AsyncLock acquired in one task may be released in another.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from .._lock_rules import LockState, Waiting, worth_retrying
from .._validate import Seconds
from ..errors import (
    ConnectionError,
    InvalidArgumentTypeError,
    LockNotAcquiredError,
    LockNotOwnedError,
)
from ..lease import Lease
from ..renewal import AutoRenew, OnLost

if TYPE_CHECKING:
    from .client import AsyncLockClient

P = ParamSpec("P")
R = TypeVar("R")


class AsyncLock(LockState[Lease]):
    """One lock name on one client, with a ttl and a default way to wait (see ``Lock``).

    ``blocking=False`` or ``timeout=0`` makes one attempt; ``timeout=None`` waits until the lock
    is free. Waiting retries with capped, jittered backoff (``asyncio.sleep``, so other tasks run).
    """

    kind = "AsyncLock"

    def __init__(self, client: AsyncLockClient, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                 timeout: Seconds | None = None, token: bytes | None = None,
                 auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None) -> None:
        self._setup(name, ttl, blocking, timeout, token, auto_renew, on_lost)
        client._renew_policy(auto_renew, on_lost, self._ttl_ms)
        self.client = client

    async def acquire(self, blocking: bool | None = None, timeout: Seconds | None = None) -> bool:
        """Take the lock: True when taken, False when ``timeout`` passed first (or, with
        ``blocking=False``, when someone else holds it). Cancelling the task while it waits
        leaves no lock behind."""
        wait = self._wait_for(blocking, timeout)
        self._check_unheld()
        client = self.client
        waiting: Waiting | None = None
        while True:
            if wait == 0.0:
                return await self._attempt(None)
            if waiting is None:
                waiting = Waiting(wait)
            try:
                lease = await self._attempt(waiting.attempt_deadline(client.options.timeout))
            except ConnectionError as error:
                if not worth_retrying(error, wait):
                    raise
                lease = False  # a lock it may have taken is released in the background
            if lease:
                return True
            pause = waiting.pause()
            if pause is None:
                return False
            await asyncio.sleep(pause)

    async def _attempt(self, deadline: float | None) -> bool:
        """One try; ``deadline`` (when shorter than the call's own) cuts it short: a lock it may
        have taken is then released in the background."""
        client = self.client
        attempt = client.try_acquire(self.name, self.ttl, token=self._token, auto_renew=self.auto_renew,
                                     on_lost=self.on_lost)
        if deadline is None:
            lease = await attempt
        else:
            try:
                lease = await asyncio.wait_for(attempt, max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                return False
        if lease is None:
            return False
        self._lease = lease
        return True

    async def release(self) -> None:
        """Release the lock. ``LockNotOwnedError`` when it had already expired or been taken over."""
        lease = self._held_lease()
        self._lease = None
        if not await self.client.release(lease):
            raise LockNotOwnedError(f"lock {self.name!r} was no longer held by this Lock when released",
                                    names=[self.name])

    async def extend(self, ttl: Seconds | None = None, *, additive: bool = False) -> bool:
        """Reset the ttl (to ``ttl``, or the Lock's own) from now: True. With ``additive=True``,
        add ``ttl`` to what is left instead. ``LockNotOwnedError`` when the lock is no longer ours."""
        lease = self._held_lease()
        if not await self.client.extend(lease, self.ttl if ttl is None else ttl, additive=additive):
            self._drop(lease)
            raise LockNotOwnedError(f"lock {self.name!r} is no longer held by this Lock; it was not extended",
                                    names=[self.name])
        return True

    async def owned(self) -> bool:
        """Whether the server still holds the lock for this Lock (asks the server)."""
        lease = self._lease
        return lease is not None and await self.client.check(lease) is not None

    async def remaining(self) -> float:
        """Seconds before the lock expires on the server if this Lock holds it, else 0."""
        lease = self._lease
        if lease is None:
            return 0.0
        left = await self.client.check(lease)
        return 0.0 if left is None else left

    async def locked(self) -> bool:
        """Whether anyone at all holds the lock (asks the server)."""
        return (await self.client.query(self.name)).held

    @property
    def lost(self) -> threading.Event:
        """Set when the current lease is found lost (auto-renewed locks are watched); to wait for
        it without blocking the loop, ``await wait_lost()``."""
        return self._held_lease().lost

    async def wait_lost(self, timeout: Seconds | None = None) -> bool:
        """Wait until the renewer finds the held, auto-renewed lock lost: True when it was,
        False when ``timeout`` passed first or the lock was released meanwhile."""
        return await self.client.wait_lost(self._held_lease(), timeout)

    async def __aenter__(self) -> AsyncLock:
        if not await self.acquire():
            raise LockNotAcquiredError(self._not_acquired_message(), names=[self.name])
        self._entered = self._lease
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if not self._exit_check(exc_type):
            return
        try:
            await self.release()
        except LockNotOwnedError:
            # The block's own exception says more than the lost lock; report the loss only when
            # the block itself succeeded, so work done without the lock is never silent.
            if exc_type is None:
                raise

    def __call__(self, func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        """Decorator for a coroutine function: each call runs holding a fresh AsyncLock with this
        one's settings."""
        if not inspect.iscoroutinefunction(func):
            raise InvalidArgumentTypeError("func", "must be a coroutine function (async def)")

        @functools.wraps(func)
        async def locked_call(*args: P.args, **kwargs: P.kwargs) -> R:
            async with self.copy():
                return await func(*args, **kwargs)

        return locked_call

    def copy(self) -> AsyncLock:
        """A new, unheld AsyncLock with the same settings."""
        return AsyncLock(self.client, self.name, self.ttl, **self._settings())
