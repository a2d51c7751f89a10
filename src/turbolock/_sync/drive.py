"""Runs a flow on the calling thread: every step blocks until it is done."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from turbolock._flows.steps import Flow, Sleep, Step

T = TypeVar("T")


def run(flow: Flow[T], perform: Callable[[Step], Any] | None = None) -> T:
    """Drive ``flow`` to its end: Sleep and Call here, every other step by ``perform``."""
    send = flow.send
    try:
        step = send(None)
        while True:
            try:
                if type(step) is tuple:  # a Call
                    fn, args, kwargs = step  # type: ignore[misc]
                    result = fn(*args, **kwargs) if kwargs else fn(*args)
                elif isinstance(step, Sleep):
                    time.sleep(step.seconds)
                    result = None
                else:
                    assert perform is not None, step
                    result = perform(step)
            except BaseException as exc:  # the flow decides what an error means
                step = flow.throw(exc)
            else:
                step = send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
