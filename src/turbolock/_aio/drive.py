"""Runs a flow in a task: every step is awaited, so the loop runs other tasks meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from turbolock._flows.steps import CallStep, Flow, Gather

T = TypeVar("T")


async def run(flow: Flow[T]) -> T:
    """Drive ``flow`` to its end: a Call's result is awaited, a Sleep slept."""
    send = flow.send
    try:
        step = send(None)
        while True:
            try:
                if type(step) is tuple:  # a Call
                    fn, args, kwargs = step  # type: ignore[misc]
                    result = await (fn(*args, **kwargs) if kwargs else fn(*args))
                elif type(step) is Gather:
                    result = await gather(step.calls)
                else:  # a Sleep
                    await asyncio.sleep(step.seconds)  # type: ignore[union-attr]
                    result = None
            except BaseException as exc:  # the flow decides what an error means
                step = flow.throw(exc)
            else:
                step = send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def gather(calls: tuple[CallStep, ...]) -> list[tuple[bool, Any]]:
    """Every call at once; each one's ``(True, value)`` or ``(False, exception)``."""
    calling = (fn(*args, **kwargs) if kwargs else fn(*args) for fn, args, kwargs in calls)
    replies = await asyncio.gather(*calling, return_exceptions=True)
    return [(False, reply) if isinstance(reply, Exception) else (True, reply) for reply in replies]
