"""``AsyncLock``: the object API over one lock name for asyncio: ``async with``, a decorator for
coroutines, and explicit calls.

Ownership belongs to the AsyncLock object (it holds the lease and its token), never to a task
or a thread: two tasks holding two AsyncLock objects on one name exclude each other, and one
AsyncLock acquired in one task may be released in another. What it does is every Lock object's
(``_flows/lock_flows``); ``AsyncLockCalls`` awaits it, for this AsyncLock and ``AsyncRedlockLock``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from turbolock._aio.drive import run
from turbolock._flows.lock_flows import LockFlows, SingleLockFlows
from turbolock._flows.renewal_book import AutoRenew, OnLost
from turbolock._wire.validate import Seconds
from turbolock.errors import ConnectionError, InvalidArgumentTypeError

if TYPE_CHECKING:
    from turbolock.asyncio.client import AsyncLockClient

P = ParamSpec("P")
R = TypeVar("R")
L = TypeVar("L", bound="AsyncLockCalls")


class AsyncLockCalls(LockFlows[Any]):
    """The coroutines of an asyncio Lock object, each awaiting its flow."""

    # Plain methods returning the driver's coroutine: one coroutine less per call (these are
    # awaited once per use of a lock, and measured).
    def _block_owner(self) -> object:
        return asyncio.current_task()

    def acquire(self, blocking: bool | None = None, timeout: Seconds | None = None) -> Awaitable[bool]:
        """Take the lock: True when taken, False when ``timeout`` passed first (or, with
        ``blocking=False``, when someone else holds it). Cancelling the task while it waits
        leaves no lock behind."""
        return self._acquire(blocking, timeout, False)

    async def _acquire(self, blocking: bool | None, timeout: Seconds | None, entering: bool) -> bool:
        wait, began = self._acquire_start(blocking, timeout)
        attempt = self._one_attempt() if wait == 0.0 else None
        if attempt is not None:
            return self._acquired(await self.client._attempt(*attempt), entering, began)
        return self._acquired(await run(self._acquire_flow(wait)), entering, began)

    def release(self) -> Awaitable[None]:
        """Release the lock. ``LockNotOwnedError`` when it had already expired or been taken over."""
        return self._release(False, None)

    async def _release(self, exiting: bool, exc_type: type[BaseException] | None) -> None:
        lease = self._release_start(exiting, exc_type)
        if lease is None:
            return
        try:
            released = await self.client.release(lease)
        except ConnectionError as exc:
            self._release_unsent(lease, exc)
            raise
        if not released:
            self._not_released(exiting, exc_type)

    async def extend(self, ttl: Seconds | None = None, *, additive: bool = False) -> bool:
        """Reset the ttl (to ``ttl``, or the Lock's own) from now: True. With ``additive=True``,
        add ``ttl`` to what is left instead. ``LockNotOwnedError`` when the lock is no longer ours."""
        return await run(self._extend_flow(ttl, additive))

    async def owned(self) -> bool:
        """Whether the server still holds the lock for this Lock (asks the server)."""
        return await run(self._owned_flow())

    async def remaining(self) -> float:
        """Seconds before the lock expires on the server if this Lock holds it, else 0."""
        return await run(self._remaining_flow())

    async def locked(self) -> bool:
        """Whether anyone at all holds the lock (asks the server)."""
        return await run(self._locked_flow())

    async def wait_lost(self, timeout: Seconds | None = None) -> bool:
        """Wait until the renewer finds the held, auto-renewed lock lost: True when it was,
        False when ``timeout`` passed first or the lock was released meanwhile."""
        result: bool = await self.client.wait_lost(self._held_lease(), timeout)
        return result

    async def __aenter__(self: L) -> L:
        await self._acquire(None, None, True)
        return self

    def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                  tb: TracebackType | None) -> Awaitable[None]:
        return self._release(True, exc_type)

    def __call__(self, func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        """Decorator for a coroutine function: each call runs holding a fresh Lock object with
        this one's settings."""
        if not inspect.iscoroutinefunction(func):
            raise InvalidArgumentTypeError("func", "must be a coroutine function (async def)")

        @functools.wraps(func)
        async def locked_call(*args: P.args, **kwargs: P.kwargs) -> R:
            async with self.copy():
                return await func(*args, **kwargs)

        return locked_call


class AsyncLock(AsyncLockCalls, SingleLockFlows):
    """One lock name on one client, with a ttl and a default way to wait (see ``Lock``).

    ``blocking=False`` or ``timeout=0`` makes one attempt; ``timeout=None`` waits until the lock
    is free. Waiting retries with capped, jittered backoff (``asyncio.sleep``, so other tasks run).
    """

    kind = "AsyncLock"

    def __init__(self, client: AsyncLockClient, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                 timeout: Seconds | None = None, token: bytes | None = None,
                 auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                 fenced: bool = False, fair: bool = False) -> None:
        self._setup(name, ttl, blocking, timeout, token, auto_renew, on_lost)
        client._renew_policy(auto_renew, on_lost, self._ttl_ms)
        self._init_fencing(client, fenced, fair)
        self._init_flows(client)
