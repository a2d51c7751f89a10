"""Runs a flow in a task: every step is awaited, so the loop runs other tasks meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from turbolock._flows.steps import Flow, Sleep, Step

T = TypeVar("T")


async def run(flow: Flow[T], perform: Callable[[Step], Awaitable[Any]] | None = None) -> T:
    """Drive ``flow`` to its end: Sleep and Call here, every other step by ``perform``."""
    send = flow.send
    try:
        step = send(None)
        while True:
            try:
                if type(step) is tuple:  # a Call
                    fn, args, kwargs = step  # type: ignore[misc]
                    result = await (fn(*args, **kwargs) if kwargs else fn(*args))
                elif isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                    result = None
                else:
                    assert perform is not None, step
                    result = await perform(step)
            except BaseException as exc:  # the flow decides what an error means
                step = flow.throw(exc)
            else:
                step = send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
