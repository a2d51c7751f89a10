"""Waiting with a time limit without ever losing the caller's cancellation.

``asyncio.wait_for`` before Python 3.12 can turn a cancellation that arrives as its time runs
out into a ``TimeoutError``, and can drop one that arrives with the inner result: a waiter that
catches the timeout then goes on waiting although it was cancelled (seen in the tests: a
cancelled blocking acquire kept waiting for the lock). ``asyncio.wait`` never swallows one.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from turbolock.errors import TimeoutError

T = TypeVar("T")


async def finished_within(future: asyncio.Future[Any], seconds: float) -> bool:
    """Whether ``future`` finished within ``seconds``; it is never cancelled here."""
    if future.done():
        return True
    done, _ = await asyncio.wait((future,), timeout=max(0.0, seconds))
    return bool(done)


async def set_within(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` was set within ``seconds``."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        return await finished_within(waiter, seconds)
    finally:
        waiter.cancel()


async def run_within(awaitable: Awaitable[T], seconds: float,
                     discard: Callable[[T], object] | None = None) -> tuple[bool, T | None]:
    """``(True, its result)`` when ``awaitable`` finishes within ``seconds`` (its exception
    raised); otherwise it is cancelled and ``(False, None)``. Cancelled with the caller.
    ``discard``: what to do with a result nobody will get (the awaitable finished just as its
    time ran out or its caller was cancelled, too late to be cancelled itself: a connection
    opened then must still be closed)."""
    task = asyncio.ensure_future(awaitable)
    try:
        finished = await finished_within(task, seconds)
    except BaseException:
        _give_up(task, discard)
        raise
    if not finished:
        _give_up(task, discard)
        return False, None
    return True, task.result()


def _give_up(task: asyncio.Future[T], discard: Callable[[T], object] | None) -> None:
    task.cancel()
    if discard is not None:
        task.add_done_callback(functools.partial(_discard_result, discard))


def _discard_result(discard: Callable[[T], object], task: asyncio.Future[T]) -> None:
    if not task.cancelled() and task.exception() is None:
        discard(task.result())


async def done_by(awaitable: Awaitable[T], deadline: float, what: str) -> T:
    """``awaitable``'s result, or a ``TimeoutError`` naming ``what`` (it is cancelled) when the
    monotonic ``deadline`` comes first."""
    finished, result = await run_within(awaitable, deadline - time.monotonic())
    if not finished:
        raise TimeoutError(f"{what} did not answer within the call's deadline")
    return result  # type: ignore[return-value]
