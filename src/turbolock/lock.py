"""``Lock``: the object API over one lock name, for ``with`` blocks, decorators and explicit calls.

Ownership belongs to the Lock object (it holds the lease and its token), never to a thread:
a Lock acquired in one thread may be released in another. What a Lock does is written once in
``_flows/lock_flows``; ``LockCalls`` runs it on the calling thread, for this Lock and
``RedlockLock`` alike.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from turbolock._flows.lock_flows import LockFlows, SingleLockFlows
from turbolock._flows.renewal_book import AutoRenew, OnLost
from turbolock._sync.drive import run
from turbolock._wire.validate import Seconds
from turbolock.errors import ConnectionError, InvalidArgumentTypeError

if TYPE_CHECKING:
    from turbolock.client import LockClient

P = ParamSpec("P")
R = TypeVar("R")
L = TypeVar("L", bound="LockCalls")


class LockCalls(LockFlows[Any]):
    """The blocking calls of a Lock object, each driving its flow."""

    # Threads may share a Lock object: each step that reads and changes its lease holds
    # ``LockFlows._state_lock``, one lock of the process for every Lock object (asyncio Lock
    # objects need none: their steps never run concurrently). Never held across a call, it is
    # contended no more than a lock of each object's own was (measured), and a forked child gets a
    # new one: a lock of each object's own, held by another thread at a fork, hung the child's
    # next use of that object.
    _drive = staticmethod(run)
    """How a call's flow is driven (a Redlock lock's counts as its client's call, for close())."""

    def _block_owner(self) -> object:
        return threading.get_ident()

    def _acquire_start(self, blocking: bool | None, timeout: Seconds | None) -> tuple[float | None, float]:
        with self._state_lock:
            return LockFlows._acquire_start(self, blocking, timeout)

    def _acquired(self, lease: Any, entering: bool, began: float = 0.0) -> bool:
        with self._state_lock:
            return LockFlows._acquired(self, lease, entering, began)

    def _release_start(self, exiting: bool, exc_type: type[BaseException] | None) -> Any:
        with self._state_lock:
            return LockFlows._release_start(self, exiting, exc_type)

    def acquire(self, blocking: bool | None = None, timeout: Seconds | None = None) -> bool:
        """Take the lock: True when taken, False when ``timeout`` passed first (or, with
        ``blocking=False``, when someone else holds it)."""
        return self._acquire(blocking, timeout, False)

    def _acquire(self, blocking: bool | None, timeout: Seconds | None, entering: bool) -> bool:
        wait, began = self._acquire_start(blocking, timeout)
        attempt = self._one_attempt() if wait == 0.0 else None
        if attempt is not None:
            return self._acquired(self.client._attempt(*attempt), entering, began)
        return self._acquired(self._drive(self._acquire_flow(wait)), entering, began)

    def release(self) -> None:
        """Release the lock. ``LockNotOwnedError`` when it had already expired or been taken over."""
        self._release(False, None)

    def _release(self, exiting: bool, exc_type: type[BaseException] | None) -> None:
        lease = self._release_start(exiting, exc_type)
        if lease is None:
            return
        try:
            released = self.client.release(lease)
        except ConnectionError as exc:
            with self._state_lock:
                self._release_unsent(lease, exc)
            raise
        if not released:
            self._not_released(exiting, exc_type)

    def extend(self, ttl: Seconds | None = None, *, additive: bool = False) -> bool:
        """Reset the ttl (to ``ttl``, or the Lock's own) from now: True. With ``additive=True``,
        add ``ttl`` to what is left instead (redis-py's default). ``LockNotOwnedError`` when the
        lock is no longer ours (the Lock keeps the lease, lost: its release raises that again)."""
        return self._drive(self._extend_flow(ttl, additive))

    def owned(self) -> bool:
        """Whether the server still holds the lock for this Lock (asks the server)."""
        return self._drive(self._owned_flow())

    def remaining(self) -> float:
        """Seconds before the lock expires on the server if this Lock holds it, else 0."""
        return self._drive(self._remaining_flow())

    def locked(self) -> bool:
        """Whether anyone at all holds the lock (asks the server)."""
        return self._drive(self._locked_flow())

    def __enter__(self: L) -> L:
        self._acquire(None, None, True)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._release(True, exc_type)

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Decorator: each call runs holding a fresh Lock with this one's settings. A coroutine,
        generator or async generator function is refused: its call only makes an object whose
        body runs later, after the lock was released."""
        if not callable(func):  # else each call would take the lock, then fail calling it
            raise InvalidArgumentTypeError("func", f"must be callable, not {type(func).__name__}")
        called = inspect.getattr_static(type(func), "__call__", None)  # a callable object's: async def too
        if any(inspect.iscoroutinefunction(f) or inspect.isgeneratorfunction(f)
               or inspect.isasyncgenfunction(f) for f in (func, called)):
            raise InvalidArgumentTypeError(
                "func", "must be a plain function: its body would run after the lock was released (for "
                        "async def, use the asyncio client's lock)")

        @functools.wraps(func)
        def locked_call(*args: P.args, **kwargs: P.kwargs) -> R:
            with self.copy():
                return func(*args, **kwargs)

        return locked_call


class Lock(LockCalls, SingleLockFlows):
    """One lock name on one client, with a ttl and a default way to wait.

    ``blocking=False`` or ``timeout=0`` makes one attempt; ``timeout=None`` waits until the lock
    is free. Each attempt keeps the client's call deadline, or what is left of the wait if that
    is shorter; an attempt whose reply was lost is released in the background and the wait goes on.
    """

    def __init__(self, client: LockClient, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                 timeout: Seconds | None = None, token: bytes | None = None,
                 auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                 fenced: bool = False, fair: bool = False) -> None:
        self._setup(name, ttl, blocking, timeout, token, auto_renew, on_lost)
        client._renew_policy(auto_renew, on_lost, self._ttl_ms)
        self._init_fencing(client, fenced, fair)
        self._init_flows(client)
