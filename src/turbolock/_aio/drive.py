"""Runs a flow in a task: every step is awaited, so the loop runs other tasks meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from turbolock._flows.steps import Flow, Gather

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
                    result = await gather(step)
                else:  # a Sleep
                    await asyncio.sleep(step.seconds)  # type: ignore[union-attr]
                    result = None
            except BaseException as exc:  # the flow decides what an error means
                step = flow.throw(exc)
            else:
                step = send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def gather(step: Gather) -> list[tuple[bool, Any]]:
    """Every call at once; each one's ``(True, value)`` or ``(False, exception)``. Cancelled,
    the calls still running are cancelled with it, and those already finished hand their
    outcomes to ``step.abandoned`` (``asyncio.gather`` would drop them)."""
    tasks = [asyncio.ensure_future(fn(*args, **kwargs) if kwargs else fn(*args))
             for fn, args, kwargs in step.calls]
    try:
        replies = await asyncio.gather(*tasks, return_exceptions=True)
    except BaseException:
        abandoned = step.abandoned
        for index, task in enumerate(tasks):
            if not task.done():
                task.cancel()
            elif abandoned is not None and not task.cancelled():
                error = task.exception()
                abandoned(index, (True, task.result()) if error is None else (False, error))
        raise
    return [(False, reply) if isinstance(reply, Exception) else (True, reply) for reply in replies]
