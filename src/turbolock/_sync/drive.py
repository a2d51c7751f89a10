"""Runs a flow on the calling thread: every step blocks until it is done."""

from __future__ import annotations

import time
from typing import TypeVar

from turbolock._flows.steps import Flow

T = TypeVar("T")


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
                else:  # a Sleep
                    time.sleep(step.seconds)  # type: ignore[union-attr]
                    result = None
            except BaseException as exc:  # the flow decides what an error means
                step = flow.throw(exc)
            else:
                step = send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
