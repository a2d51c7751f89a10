"""Runs a flow on the calling thread: every step blocks until it is done."""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

from turbolock._flows.steps import CallStep, Flow, Gather

T = TypeVar("T")

HELPER_IDLE_SECONDS = 30.0
"""How long a gather helper thread waits for another call before it ends."""


class _Helpers:
    """Threads that make a ``Gather``'s calls beside the caller's, shared by every client. An
    idle one takes a call, else a new one starts: no call ever queues behind others (a fixed
    pool let calls to a stopped master hold up every client's calls, renewal rounds included,
    past their deadlines). A helper idle for ``HELPER_IDLE_SECONDS`` ends."""

    def __init__(self) -> None:
        self._ready = threading.Condition(threading.Lock())
        self._calls: deque[tuple[Future[Any], CallStep]] = deque()
        self._idle = 0

    def submit(self, call: CallStep) -> Future[tuple[bool, Any]]:
        future: Future[tuple[bool, Any]] = Future()
        with self._ready:
            self._calls.append((future, call))
            if self._idle >= len(self._calls):
                self._ready.notify()
                return future
        threading.Thread(target=self._serve, name="turbolock-gather", daemon=True).start()
        return future

    def _serve(self) -> None:
        ready = self._ready
        calls = self._calls
        while True:
            with ready:
                while not calls:
                    self._idle += 1
                    try:
                        woken = ready.wait(HELPER_IDLE_SECONDS)
                    finally:
                        self._idle -= 1
                    if not woken and not calls:
                        return
                future, call = calls.popleft()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(_outcome(call))
                except BaseException as exc:  # SystemExit...: the caller's thread sees it
                    future.set_exception(exc)


_helpers = _Helpers()

_abandoned_running = 0
"""Calls of interrupted gathers still running on helper threads (see ``wait_for_abandoned``)."""
_abandoned_done = threading.Condition()


def _forget_helpers_after_fork() -> None:
    global _helpers, _abandoned_running, _abandoned_done
    _helpers = _Helpers()  # the parent's threads are not in the child
    _abandoned_running, _abandoned_done = 0, threading.Condition()


os.register_at_fork(after_in_child=_forget_helpers_after_fork)


def _outcome(call: CallStep) -> tuple[bool, Any]:
    fn, args, kwargs = call
    try:
        return True, fn(*args, **kwargs) if kwargs else fn(*args)
    except Exception as exc:  # the flow decides what each error means
        return False, exc


def gather(step: Gather) -> list[tuple[bool, Any]]:
    """Every call at once: the first on this thread, the others on helper threads. Interrupted
    (KeyboardInterrupt in the first call, or while waiting for the others), the others go on
    and their outcomes go to ``step.abandoned``."""
    calls = step.calls
    if not calls:
        return []
    helpers = _helpers
    others: list[Future[Any]] = []
    first: tuple[bool, Any] | None = None
    try:
        for call in calls[1:]:  # one by one: an interrupt between two still hands over the first
            others.append(helpers.submit(call))
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
