"""Auto-renewal for asyncio: one task and one timer wheel (the core's ``TimerWheel``) renew every
held lock of a client, with the blocking renewer's rules (see ``turbolock.renewal``): batched
``RENEW_MANY`` scripts, retries until the lock's local safe-until passes, then lost.

A lost lock is always signalled: ``lease.lost`` is set, ``on_lost(lease)`` is called in the
renewal task (a coroutine it returns runs as a task of its own; exceptions are logged), waiters
in ``wait_lost`` wake up, and ``lease.ensure_held()`` raises.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from turbolock._aio.drive import run
from turbolock._flows.renewal_book import (
    CLOSED_DURING_ACQUIRE,
    AutoRenew,
    OnLost,
    RenewalBook,
    RenewalState,
)
from turbolock._flows.renewal_round import (
    call_on_lost,
    due_round_flow,
    lose_together,
    lose_unrenewed,
    renew_round_flow,
    take_due,
)
from turbolock._wire.validate import Seconds, timeout_seconds
from turbolock.errors import ClientClosedError, LockUsageError
from turbolock.lease import Lease

if TYPE_CHECKING:
    from turbolock.asyncio.client import AsyncLockClient

log = logging.getLogger("turbolock.renewal")

__all__ = ["OnLost", "Renewer"]


ROUND_ITERATIONS = 12
"""Loop iterations a renewal round may take, start to settled, in units of the median wake-up
lateness (about six measured, each up to twice the median late on a loop of even slices)."""
LAG_SAMPLES = 9
"""Wake-ups whose lateness the lag is the median of."""
MAX_LEAD = 1.0
"""The most a round starts early."""


class Renewer:
    """The renewal task of one client; started on the first auto-renewed lease."""

    lead = 0.0
    """How much earlier than due a round starts: ``_loop_lag``."""

    def __init__(self, client: AsyncLockClient, book: RenewalBook | None = None) -> None:
        self._client = client
        self._late: collections.deque[float] = collections.deque(maxlen=LAG_SAMPLES)
        self.book = RenewalBook(client.core, time.monotonic()) if book is None else book
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._waiters: dict[int, list[asyncio.Future[bool]]] = {}
        self._callbacks: set[asyncio.Future[Any]] = set()

    def __len__(self) -> int:
        return len(self.book)

    def add(self, leases: Iterable[Lease], policy: AutoRenew, on_lost: OnLost | None) -> None:
        if self._stopping:
            raise ClientClosedError(CLOSED_DURING_ACQUIRE)
        self.book.add(leases, policy, on_lost)
        self._run_in_running_loop()
        self._wakeup.set()

    def follow_running_loop(self) -> None:
        """The client moved to the running loop: the task of the loop it left renews nothing
        more (that loop is closed, or idle), so one starts here while any lease is renewed."""
        if not self._stopping and len(self.book):
            self._run_in_running_loop()

    def _run_in_running_loop(self) -> None:
        task = self._task
        loop = asyncio.get_running_loop()
        if task is None or task.done() or task.get_loop() is not loop:
            if task is not None and task.get_loop() is not loop:
                self._wakeup = asyncio.Event()  # an Event stays bound to the loop of its first wait()
                if not task.done() and not task.get_loop().is_closed():
                    task.cancel()  # should that idle loop run again, no second task renews there
            self._task = loop.create_task(self._run())

    def remove(self, leases: Iterable[Lease]) -> None:
        """Stop renewing (the lease is being released); a renewal in flight is then ignored."""
        for item_id in self.book.remove(leases):
            self._wake_waiters(item_id, False)

    def rescheduled(self, lease: Lease) -> None:
        self.book.rescheduled(lease)

    def held_leases(self) -> list[Lease]:
        return self.book.held_leases()

    async def stop(self, deadline: float | None = None) -> None:
        """Stop the task; a renewal in flight is abandoned (``deadline`` is the thread's)."""
        task = self.abort()
        if task is not None:
            await asyncio.wait([task])

    def abort(self) -> asyncio.Task[None] | None:
        """Stop the task without waiting for it to end (a close() cancelled part-way): the task
        cancelled, if it runs in this loop."""
        self._stopping = True
        task = self._task
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            task.cancel()  # a renewal in flight is abandoned; its replies are read and dropped
            return task
        return None

    async def wait_lost(self, lease: Lease, timeout: Seconds | None) -> bool:
        wait = timeout_seconds(timeout)
        if lease.is_lost:
            return True
        state = lease.renewal
        if state is None:
            raise LockUsageError(f"lock {lease.name!r} is not auto-renewed; only renewed locks are watched",
                                 names=[lease.name])
        if state.released:
            return False
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(state.id, [])
        waiters.append(fut)
        try:
            await asyncio.wait([fut], timeout=wait)
        finally:
            if not fut.done():
                fut.cancel()
            if fut in waiters:
                waiters.remove(fut)
            if not waiters:
                self._waiters.pop(state.id, None)
        return fut.done() and not fut.cancelled() and fut.result()

    def _wake_waiters(self, item_id: int, lost: bool) -> None:
        for fut in self._waiters.pop(item_id, ()):
            if not fut.done() and not fut.get_loop().is_closed():
                fut.set_result(lost)

    # -- the task -------------------------------------------------------------------------------

    async def _run(self) -> None:
        book = self.book
        loop = asyncio.get_running_loop()
        while not self._stopping:
            await self._round()  # in a call of its own: no lease stays referenced between rounds
            if len(book):
                wake = loop.time() + book.poll
                await asyncio.sleep(book.poll)
                self._loop_lag(loop.time() - wake)
            else:
                self._wakeup.clear()
                await self._wakeup.wait()

    def _loop_lag(self, late: float) -> None:
        """A wake-up ``late`` seconds past its time: the loop runs other tasks' work between its
        iterations, and a round takes several (its task, the write, the reply, each await), each
        as late. Rounds then start earlier (``lead``) by that many times the recent lag, so a busy,
        not blocked, loop does not let a lock expire that the server would have renewed. The lag
        is the median of the last few wake-ups: a loop blocked once (a slow synchronous call) is
        not a busy loop, and must not set every lock renewing at every wake-up for a while (nor
        spend their ``max_renewals``)."""
        samples = self._late
        samples.append(late)
        lag = sorted(samples)[len(samples) // 2]
        self.lead = min(ROUND_ITERATIONS * lag, MAX_LEAD)

    async def _round(self) -> None:
        to_send = take_due(self)
        if to_send:
            await run(due_round_flow(self, to_send))

    def _release_dropped(self) -> None:
        for state in self.book.take_collected():
            self._wake_waiters(state.id, False)
            self._client._abandoned(state.key, state.token, time.monotonic() + state.ttl_ms / 1000.0)

    async def _send(self, leases: list[Lease]) -> None:
        await run(renew_round_flow(self._client, self, leases))

    def _failed(self, batch: list[Lease], sent_at: float | None, sent: bool = True) -> None:
        now = time.monotonic()
        lose_unrenewed(self, self._client, self.book.failed(batch, sent_at, now, sent), now)

    def _lost(self, lease: Lease, reason: str) -> None:
        lose_together(self, [(lease, reason)])

    def _signal(self, lease: Lease, state: RenewalState) -> None:
        """A lease just marked lost: its ``wait_lost`` callers woken, its ``on_lost`` called."""
        self._wake_waiters(state.id, True)
        on_lost = lease._on_lost()
        if on_lost is None:
            return
        result = call_on_lost(on_lost, lease)
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._callbacks.add(task)
            task.add_done_callback(functools.partial(self._callback_done, lease.name))

    def _callback_done(self, name: str | bytes, task: asyncio.Future[Any]) -> None:
        self._callbacks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("turbolock: on_lost callback for lock %r raised", name, exc_info=task.exception())
