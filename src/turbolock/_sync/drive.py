"""Runs a flow on the calling thread: every step blocks until it is done."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from turbolock._flows.steps import CallStep, Flow, Gather

T = TypeVar("T")

GATHER_THREADS = 16
"""Threads that make a ``Gather``'s calls beside the caller's (shared by every client)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool_after_fork() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()  # the parent's threads are not in the child


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _outcome(call: CallStep) -> tuple[bool, Any]:
    fn, args, kwargs = call
    try:
        return True, fn(*args, **kwargs) if kwargs else fn(*args)
    except Exception as exc:  # the flow decides what each error means
        return False, exc


def gather(calls: tuple[CallStep, ...]) -> list[tuple[bool, Any]]:
    """Every call at once: the first on this thread, the others on the shared pool."""
    global _pool
    if not calls:
        return []
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(GATHER_THREADS, thread_name_prefix="turbolock-gather")
    others = [_pool.submit(_outcome, call) for call in calls[1:]]
    first = _outcome(calls[0])
    return [first, *(future.result() for future in others)]


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
                    result = gather(step.calls)
                else:  # a Sleep
                    time.sleep(step.seconds)  # type: ignore[union-attr]
                    result = None
            except BaseException as exc:  # the flow decides what an error means
                step = flow.throw(exc)
            else:
                step = send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
