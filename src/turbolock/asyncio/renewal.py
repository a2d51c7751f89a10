"""Auto-renewal for asyncio: one task and one timer wheel (the core's ``TimerWheel``) renew every
held lock of a client, with the blocking renewer's rules (see ``turbolock.renewal``): batched
``RENEW_MANY`` scripts, retries until the lock's local safe-until passes, then lost.

A lost lock is always signalled: ``lease.lost`` is set, ``on_lost(lease)`` is called in the
renewal task (a coroutine it returns runs as a task of its own; exceptions are logged), waiters
in ``wait_lost`` wake up, and ``lease.ensure_held()`` raises.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import _scripts
from .._executor import NOT_SENT, UNKNOWN
from .._validate import Seconds, timeout_seconds
from ..errors import InvalidArgumentError, LockUsageError
from ..lease import Lease
from ..renewal import (
    COMMANDS_PER_WRITE,
    NO_LIMIT,
    POLL_INTERVAL,
    WHEEL_SLOTS,
    WHEEL_TICK,
    AutoRenew,
    OnLost,
    RenewalState,
    RenewalTerms,
    batch_encoders,
    describe_reply,
    limit_reached,
    retry_time,
    split_batches,
)

if TYPE_CHECKING:
    from .client import AsyncLockClient

log = logging.getLogger("turbolock.renewal")

__all__ = ["OnLost", "Renewer"]


class Renewer:
    """The renewal task of one client; started on the first auto-renewed lease."""

    def __init__(self, client: AsyncLockClient) -> None:
        self._client = client
        self._wheel: Any = client.core.TimerWheel(WHEEL_TICK, WHEEL_SLOTS, time.monotonic())
        self._held: dict[int, Lease] = {}
        self._ids = itertools.count(1)
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._poll = POLL_INTERVAL
        self._waiters: dict[int, list[asyncio.Future[bool]]] = {}
        self._callbacks: set[asyncio.Future[Any]] = set()

    def __len__(self) -> int:
        return len(self._held)

    def add(self, leases: Iterable[Lease], policy: AutoRenew, on_lost: OnLost | None) -> None:
        if self._stopping:
            raise InvalidArgumentError("auto_renew", "the client is closed")
        before = policy.renew_before
        assert before is not None
        max_hold = policy.max_hold
        self._poll = max(WHEEL_TICK, min(self._poll, before / 4))
        wheel = self._wheel
        held = self._held
        ids = self._ids
        terms = RenewalTerms(before, policy.max_renewals, on_lost)
        for lease in leases:
            hold_until = NO_LIMIT if max_hold is None else lease.acquired_at + max_hold
            state = RenewalState(next(ids), terms, hold_until)
            lease.renewal = state
            held[state.id] = lease
            wheel.schedule(state.id, lease.expires_at - before)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        self._wakeup.set()

    def remove(self, leases: Iterable[Lease]) -> None:
        """Stop renewing (the lease is being released); a renewal in flight is then ignored."""
        for lease in leases:
            state = lease.renewal
            if state is None:
                continue
            state.released = True
            self._wheel.cancel(state.id)
            self._held.pop(state.id, None)
            self._wake_waiters(state.id, False)

    def rescheduled(self, lease: Lease) -> None:
        """The lease was extended by hand: renew relative to its new expiry."""
        state = lease.renewal
        if state is not None:
            self._reschedule(lease, lease.expires_at - state.renew_before)

    def held_leases(self) -> list[Lease]:
        return list(self._held.values())

    async def stop(self) -> None:
        self._stopping = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()  # a renewal in flight is abandoned; its replies are read and dropped
            await asyncio.wait([task])

    async def wait_lost(self, lease: Lease, timeout: Seconds | None) -> bool:
        wait = timeout_seconds(timeout)
        if lease.is_lost:
            return True
        state = lease.renewal
        if state is None:
            raise LockUsageError(f"lock {lease.name!r} is not auto-renewed; only renewed locks are watched")
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
            if not fut.done():
                fut.set_result(lost)

    # -- the task -------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            due_ids = self._wheel.advance(time.monotonic())
            held = self._held
            due = [held[i] for i in due_ids if i in held]
            if due:
                try:
                    await self._renew(due)
                except Exception:  # the renewer must survive anything
                    log.exception("turbolock: renewal round failed; retrying its locks")
                    self._retry_later(due)
            if self._held:
                await asyncio.sleep(self._poll)
            else:
                self._wakeup.clear()
                await self._wakeup.wait()

    async def _renew(self, due: list[Lease]) -> None:
        now = time.monotonic()
        to_send: list[Lease] = []
        for lease in due:
            state = lease.renewal
            if state is None or state.released:
                continue
            if lease.expires_at <= now:
                reason = ("its renewal limit was reached and it expired" if state.limit_reached else
                          "it could not be renewed before it expired")
                self._lost(lease, reason)
            elif state.limit_reached or limit_reached(lease, state, now):
                state.limit_reached = True
                self._reschedule(lease, lease.expires_at)
            else:
                to_send.append(lease)
        if to_send:
            await self._send(to_send)

    async def _send(self, leases: list[Lease]) -> None:
        batches = split_batches(leases)
        encode, reencode = batch_encoders(batches, _scripts.RENEW_MANY.sha)
        sent_at = time.monotonic()
        try:
            replies = await self._client._exec.many(len(batches), encode, _scripts.RENEW_MANY, reencode,
                                                    chunk_size=COMMANDS_PER_WRITE)
        except Exception as exc:  # no connection at all: every lock is indeterminate
            log.warning("turbolock: renewal of %d locks could not be sent: %s", len(leases), exc)
            replies = [NOT_SENT] * len(batches)
        for (_, batch), reply in zip(batches, replies, strict=True):
            if type(reply) is list and len(reply) == len(batch):
                self._settle(batch, reply, sent_at)
            else:
                if reply is not UNKNOWN and reply is not NOT_SENT:
                    log.warning("turbolock: renewal of %d locks got %s", len(batch), describe_reply(reply))
                self._retry_later(batch)

    def _settle(self, batch: list[Lease], outcomes: list[object], sent_at: float) -> None:
        for lease, outcome in zip(batch, outcomes, strict=True):
            state = lease.renewal
            if state is None or state.released:
                continue
            if outcome == 1:
                lease.acquired_at = sent_at
                state.renewals += 1
                self._wheel.schedule(state.id, lease.expires_at - state.renew_before)
            else:
                self._lost(lease, "its key was gone or held by another token at renewal")

    def _retry_later(self, leases: list[Lease]) -> None:
        now = time.monotonic()
        for lease in leases:
            state = lease.renewal
            if state is None or state.released:
                continue
            self._wheel.schedule(state.id, retry_time(lease, state, now))

    def _reschedule(self, lease: Lease, when: float) -> None:
        state = lease.renewal
        assert state is not None
        if not state.released:
            self._wheel.schedule(state.id, when)

    def _lost(self, lease: Lease, reason: str) -> None:
        state = lease.renewal
        assert state is not None
        if state.released:
            return
        self._wheel.cancel(state.id)
        self._held.pop(state.id, None)
        if not lease.mark_lost(reason):
            return
        log.warning("turbolock: lock %r lost: %s", lease.name, reason)
        self._wake_waiters(state.id, True)
        if state.on_lost is None:
            return
        try:
            result = state.on_lost(lease)
        except Exception:  # a callback must never stop the renewer
            log.exception("turbolock: on_lost callback for lock %r raised", lease.name)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._callbacks.add(task)
            task.add_done_callback(functools.partial(self._callback_done, lease.name))

    def _callback_done(self, name: str | bytes, task: asyncio.Future[Any]) -> None:
        self._callbacks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("turbolock: on_lost callback for lock %r raised", name, exc_info=task.exception())

