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

from .._backoff import Backoff
from .._validate import Seconds, check_token, encode_name, timeout_seconds, ttl_ms
from ..errors import (
    InvalidArgumentTypeError,
    LockLostError,
    LockNotAcquiredError,
    LockNotOwnedError,
    LockUsageError,
)
from ..lease import Lease
from ..renewal import AutoRenew, OnLost

if TYPE_CHECKING:
    from .client import AsyncLockClient

P = ParamSpec("P")
R = TypeVar("R")


class AsyncLock:
    """One lock name on one client, with a ttl and a default way to wait.

    ``blocking=False`` or ``timeout=0`` makes one attempt; ``timeout=None`` waits forever.
    Waiting retries with capped, jittered backoff (``asyncio.sleep``, so other tasks run).
    """

    def __init__(self, client: AsyncLockClient, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                 timeout: Seconds | None = None, token: bytes | None = None,
                 auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None) -> None:
        encode_name(name)
        client._renew_policy(auto_renew, on_lost, ttl_ms(ttl))
        if not isinstance(blocking, bool):
            raise InvalidArgumentTypeError("blocking", "must be True or False")
        self._timeout = timeout_seconds(timeout)
        if token is not None:
            check_token(token)
        self.client = client
        self.name = name
        self.ttl = ttl
        self.blocking = blocking
        self.timeout = timeout
        self._token = token
        self.auto_renew = auto_renew
        self.on_lost = on_lost
        self._lease: Lease | None = None

    @property
    def lease(self) -> Lease | None:
        """The current lease, or None when this AsyncLock does not hold the lock."""
        return self._lease

    async def acquire(self, blocking: bool | None = None, timeout: Seconds | None = None) -> bool:
        """Take the lock: True when taken, False when ``timeout`` passed first (or, with
        ``blocking=False``, when someone else holds it). Cancelling the task while it waits
        leaves no lock behind."""
        if blocking is None:
            blocking = self.blocking
        wait = timeout_seconds(timeout) if timeout is not None else self._timeout
        if not blocking:
            wait = 0.0
        if self._lease is not None:
            raise LockUsageError(f"lock {self.name!r} is already held by this Lock object")
        client = self.client
        deadline = None if wait is None else time.monotonic() + wait
        backoff: Backoff | None = None
        while True:
            lease = await client.try_acquire(self.name, self.ttl, token=self._token,
                                             auto_renew=self.auto_renew, on_lost=self.on_lost)
            if lease is not None:
                self._lease = lease
                return True
            if wait == 0.0:
                return False
            if backoff is None:
                backoff = Backoff()
            if deadline is None:
                await asyncio.sleep(backoff.next_delay(None))
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.sleep(backoff.next_delay(remaining))

    def _take_lease(self) -> Lease:
        lease = self._lease
        if lease is None:
            raise LockUsageError(f"lock {self.name!r} is not held by this Lock object")
        return lease

    async def release(self) -> None:
        """Release the lock. ``LockNotOwnedError`` when it had already expired or been taken over."""
        lease = self._take_lease()
        self._lease = None
        if not await self.client.release(lease):
            raise LockNotOwnedError(f"lock {self.name!r} was no longer held by this Lock when released")

    async def extend(self, ttl: Seconds | None = None) -> None:
        """Reset the ttl (to ``ttl``, or the Lock's own) from now. ``LockNotOwnedError`` when lost."""
        lease = self._take_lease()
        if not await self.client.extend(lease, self.ttl if ttl is None else ttl):
            if self._lease is lease:
                self._lease = None
            raise LockNotOwnedError(f"lock {self.name!r} is no longer held by this Lock; it was not extended")

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

    def valid_for(self) -> float:
        """Seconds the lock is safely ours by the local clock (0 when not held or lost); no round trip."""
        lease = self._lease
        return 0.0 if lease is None else lease.valid_for()

    def ensure_held(self) -> None:
        """``LockLostError`` unless this Lock holds the lock by the local clock; no round trip.
        Call it right before acting on what the lock protects."""
        lease = self._lease
        if lease is None:
            raise LockLostError(f"lock {self.name!r} is not held by this Lock object")
        lease.ensure_held()

    @property
    def lost(self) -> threading.Event:
        """Set when the current lease is found lost (auto-renewed locks are watched); to wait for
        it without blocking the loop, ``await wait_lost()``."""
        return self._take_lease().lost

    async def wait_lost(self, timeout: Seconds | None = None) -> bool:
        """Wait until the renewer finds the held, auto-renewed lock lost: True when it was,
        False when ``timeout`` passed first or the lock was released meanwhile."""
        return await self.client.wait_lost(self._take_lease(), timeout)

    async def locked(self) -> bool:
        """Whether anyone at all holds the lock."""
        return (await self.client.query(self.name)).held

    async def __aenter__(self) -> AsyncLock:
        if not await self.acquire():
            waited = f" within {self._timeout:g}s" if self.blocking and self._timeout is not None else ""
            raise LockNotAcquiredError(f"lock {self.name!r} was not acquired{waited}")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._lease is None:
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
        return AsyncLock(self.client, self.name, self.ttl, blocking=self.blocking, timeout=self.timeout,
                         token=self._token, auto_renew=self.auto_renew, on_lost=self.on_lost)

    def __repr__(self) -> str:
        return f"AsyncLock(name={self.name!r}, ttl={self.ttl!r}, held={self._lease is not None})"
