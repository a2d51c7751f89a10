"""Runs a flow on the calling thread: every step blocks until it is done."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from turbolock._flows.steps import CallStep, Flow, Gather

T = TypeVar("T")

GATHER_THREADS = 16
"""Threads that make a ``Gather``'s calls beside the caller's (shared by every client)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


_abandoned_running = 0
"""Calls of interrupted gathers still running on the pool (see ``wait_for_abandoned``)."""
_abandoned_done = threading.Condition()


def _forget_pool_after_fork() -> None:
    global _pool, _pool_lock, _abandoned_running, _abandoned_done
    _pool, _pool_lock = None, threading.Lock()  # the parent's threads are not in the child
    _abandoned_running, _abandoned_done = 0, threading.Condition()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _outcome(call: CallStep) -> tuple[bool, Any]:
    fn, args, kwargs = call
    try:
        return True, fn(*args, **kwargs) if kwargs else fn(*args)
    except Exception as exc:  # the flow decides what each error means
        return False, exc


def gather(step: Gather) -> list[tuple[bool, Any]]:
    """Every call at once: the first on this thread, the others on the shared pool. Interrupted
    (KeyboardInterrupt in the first call, or while waiting for the others), the others go on
    and their outcomes go to ``step.abandoned``."""
    global _pool
    calls = step.calls
    if not calls:
        return []
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(GATHER_THREADS, thread_name_prefix="turbolock-gather")
    others: list[Future[Any]] = []
    first: tuple[bool, Any] | None = None
    try:
        for call in calls[1:]:  # one by one: an interrupt between two still hands over the first
            others.append(_pool.submit(_outcome, call))
        first = _outcome(calls[0])
        return [first, *(future.result() for future in others)]
    except BaseException:
        abandoned = step.abandoned
        if abandoned is not None:
            if first is not None:
                abandoned(0, first)
            for index, future in enumerate(others, 1):
                _count_abandoned(1)
                future.add_done_callback(partial(_hand_over, abandoned, index))
        raise


def _hand_over(abandoned: Callable[[int, tuple[bool, Any]], None], index: int, future: Future[Any]) -> None:
    try:
        abandoned(index, future.result())
    finally:
        _count_abandoned(-1)


def _count_abandoned(change: int) -> None:
    global _abandoned_running
    with _abandoned_done:
        _abandoned_running += change
        if not _abandoned_running:
            _abandoned_done.notify_all()


def wait_for_abandoned(deadline: float) -> bool:
    """Wait, until ``deadline``, for the calls of interrupted gathers to hand over what they took
    (a client's close waits so before its last cleanup); whether none is left."""
    with _abandoned_done:
        return _abandoned_done.wait_for(lambda: not _abandoned_running, max(0.0, deadline - time.monotonic()))


def run(flow: Flow[T]) -> T:
    """Drive ``flow`` to its end: a Call is made, a Sleep slept."""
    send = flow.send
    try:
        step = send(None)
        while True:
            try:
                if type(step) is tuple:  # a Call
                    fn, args, kwargs = step  # type: ignore[misc]
                    result = fn(*args, **kwargs) if kwargs else fn(*args)
                elif type(step) is Gather:
                    result = gather(step)
                else:  # a Sleep
                    time.sleep(step.seconds)  # type: ignore[union-attr]
                    result = None
            except BaseException as exc:  # the flow decides what an error means
                step = flow.throw(exc)
            else:
                step = send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
