"""Cancelling an asyncio call part-way, as a ``wait_for`` or a task's cancel would."""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_after(coro: Any, iterations: int = 0, seconds: float = 0.0) -> tuple[bool, Any]:
    """Run ``coro`` as a task, cancel it after ``iterations`` loop iterations and ``seconds``:
    (finished, result); (False, None) when the cancel landed."""
    task = asyncio.ensure_future(coro)
    for _ in range(iterations):
        await asyncio.sleep(0)
    if seconds:
        await asyncio.sleep(seconds)
    task.cancel()
    try:
        return True, await task
    except asyncio.CancelledError:
        return False, None
