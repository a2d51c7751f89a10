"""An asyncio waiter cancelled after a release woke it, before its attempt was sent, passes the
wake-up on as it leaves: the release woke one waiter of the process (that one), so without it
the next waiter slept on with the lock free until its next poll. The cancel is placed exactly:
the first waiter's attempt after the release is a coroutine that cancels its own task before
anything is sent. Found in review (the threaded twin: ``tests/test_wake_up_passed_on.py``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from async_helpers import NewClient, Runner

from _waking import stop_polling


def test_a_waiter_cancelled_between_its_wake_up_and_its_attempt_passes_it_on(
        arun: Runner, new_client: NewClient, monkeypatch: pytest.MonkeyPatch) -> None:
    stop_polling(monkeypatch)  # only a wake-up can hand the lock over

    async def body() -> None:
        client, holder = new_client(), new_client()
        held = await holder.try_acquire("seat", 30)
        assert held is not None
        real_attempt = client._attempt
        releasing = False
        cancelled_before_sending = []

        async def cancelled_at_once() -> None:
            cancelled_before_sending.append(True)
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(0)  # the cancel lands here, before any byte of the attempt

        def attempt(*args: Any) -> Any:
            if releasing and asyncio.current_task() is first:
                return cancelled_at_once()
            return real_attempt(*args)

        monkeypatch.setattr(client, "_attempt", attempt)
        first = asyncio.ensure_future(client.lock("seat", 30).acquire(timeout=20))
        await asyncio.sleep(0.1)
        second = asyncio.ensure_future(client.lock("seat", 30).acquire(timeout=5))
        await asyncio.sleep(0.2)
        releasing = True
        released = time.monotonic()
        assert await holder.release(held)  # wakes one waiter of the process: the first
        await asyncio.gather(first, return_exceptions=True)
        assert first.cancelled() and cancelled_before_sending == [True]
        assert await second, "the second waiter was never woken: the cancelled one kept the wake-up"
        assert time.monotonic() - released < 1.0
        assert client._waker().book.waiting == 0
        await client.close()
        await holder.close()

    arun(body)
