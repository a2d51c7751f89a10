"""``AsyncRedlockClient``: the whole API of ``RedlockClient`` for asyncio. The algorithm is the
flows' (``_flows/redlock_*``), the same as the threaded client's; this client awaits them,
fanning each step out to the masters' pipelining connections (``_aio.fanout``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from functools import partial
from types import TracebackType
from typing import Any

from turbolock import _metrics
from turbolock._aio.drive import run
from turbolock._aio.fanout import fan_out, fan_out_one
from turbolock._aio.pauses import Pauses
from turbolock._aio.redlock_renewer import AsyncRedlockRenewer
from turbolock._flows.client_settings import DEFAULT_CHUNK_SIZE
from turbolock._flows.closing import stop_renewing_flow
from turbolock._flows.lock_flows import RedlockLockFlows
from turbolock._flows.lock_rules import lock_ttl
from turbolock._flows.ownership import Owner, forget_parent_locks_after_fork
from turbolock._flows.redlock_bulk import extend_many_flow, release_many_flow
from turbolock._flows.redlock_flows import RedlockFlows
from turbolock._flows.redlock_result import RedlockLease, RedlockManyResult, RedlockResult
from turbolock._flows.redlock_rules import (
    CLEANUP_GRACE,
    DEFAULT_DRIFT_FACTOR,
    DEFAULT_NODE_TIMEOUT,
    DEFAULT_RETRY_DELAY,
)
from turbolock._flows.renewal_book import AutoRenew, OnLost
from turbolock._redlock.masters import take_masters
from turbolock._wire import scripts as _scripts
from turbolock._wire.validate import Seconds
from turbolock.asyncio.client import AsyncLockClient
from turbolock.asyncio.lock import AsyncLockCalls
from turbolock.lease import LockInfo

log = logging.getLogger("turbolock.redlock")


class AsyncRedlockClient(RedlockFlows):
    """Locks on a majority of ``masters`` for asyncio: three or more independent Redis servers,
    as URLs or ``AsyncLockClient``s; share one per event loop. Settings, results, statuses and
    errors are ``RedlockClient``'s. A master that does not answer costs one node timeout for
    all of them; its late replies are read and dropped, and what a command may have taken
    there is released with its token in the background."""

    def __init__(self, masters: Sequence[str | AsyncLockClient], *, node_timeout: Seconds | None = None,
                 retry_count: int | None = None, retry_delay: Seconds = DEFAULT_RETRY_DELAY,
                 drift_factor: float = DEFAULT_DRIFT_FACTOR, key_prefix: str | bytes | None = None,
                 core: str | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE, **connection: Any) -> None:
        self._configure(node_timeout, retry_count, retry_delay, drift_factor)
        take_masters(self, masters, key_prefix, core, chunk_size, AsyncLockClient, connection)
        self._buffer: Any = self.core.CommandBuffer(self.key_prefix)  # one batch, encoded once for all
        # The flows' fan-outs (``_flows/steps``), on the masters' asyncio connections.
        self._fan_one = partial(fan_out_one, self.masters, self._buffer)
        self._fan_many = partial(fan_out, self.masters, self._buffer)
        self._renewer_instance: AsyncRedlockRenewer | None = None
        self._closed = False
        self._close_done = False
        self._pauses = Pauses()
        self._parents: list[Any] = []
        forget_parent_locks_after_fork(self)  # after the masters' clients: each forgets its own first
        for master in self.masters:  # the Redlock renewal task follows the masters to a new loop
            master._pool.on_new_loop = partial(_follow_running_loop, master, self)

    def _forget_parent_locks(self) -> None:
        # In a forked child: the parent's Redlock leases and their renewal task are the parent's.
        if self._closed and not self._close_done:  # a close under way in the parent is the parent's
            self._closed = False
            self._renewals_stopped = False
        self._owner = Owner()
        self._parents.append(self._renewer_instance)
        self._renewer_instance = None
        self._pauses = Pauses()

    # -- single locks ---------------------------------------------------------------------------

    async def acquire(self, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                      timeout: Seconds | None = None, token: bytes | None = None,
                      auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                      max_extensions: int | None = None, fenced: bool = False) -> RedlockResult:
        """Take ``name`` on a majority of the masters; the result says how it went (see
        ``RedlockClient.acquire``)."""
        flow = self._acquire_flow(name, ttl, blocking, timeout, token, auto_renew, on_lost, max_extensions,
                                  fenced)
        return await run(flow)

    async def try_acquire(self, name: str | bytes, ttl: Seconds, *, token: bytes | None = None,
                          auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                          max_extensions: int | None = None, fenced: bool = False) -> RedlockLease | None:
        """One attempt: a ``RedlockLease``, or None (Conflicted or Expired); ``QuorumError`` when
        fewer than a quorum of masters answered (see ``RedlockClient.try_acquire``)."""
        attempt = self._attempting(name, ttl, token, auto_renew, on_lost, max_extensions, fenced)
        key, tok, ms, _, node_timeout, _, policy, _ = attempt
        if token is not None or self._closed:  # a token reused, or a closed client: the flow's checks
            result = await run(self._attempt_flow(name, attempt, 1))
            lease = self._tried(result)
            self._taken(result, policy, on_lost)
            return lease
        started = time.monotonic()
        try:
            replies, failures = await self._fan_one(*self._attempt_call(attempt))
        except BaseException:  # cancelled: it may have taken the lock anywhere
            self._abandoned(key, tok, started + ms / 1000.0 + CLEANUP_GRACE, True)
            raise
        result, granted = self._attempted(name, attempt, started, replies, failures, 1, True)
        if granted:
            await run(self._give_back_flow(granted, key, tok, started, ms, node_timeout))
        lease = self._tried(result)
        self._taken(result, policy, on_lost)
        return lease

    async def query(self, name: str | bytes) -> LockInfo:
        """Whether a quorum of masters holds ``name``, and for how long at least a quorum still will
        (see ``RedlockClient.query``)."""
        return await run(self._query_flow(name))

    async def check(self, lease: RedlockLease) -> float | None:
        """Seconds a majority of masters still holds the lock for ``lease``, None when fewer do
        (see ``RedlockClient.check``)."""
        return await run(self._check_flow(lease))

    async def release(self, lease: RedlockLease) -> bool:
        """Delete the lock on every master where it is still ours: True when that was a majority."""
        lease, node_timeout, forget_at = self._releasing(lease)
        started = time.monotonic() if _metrics.sink is not None else 0.0  # timed only when reported
        try:
            replies, _ = await self._fan_one(self._compare_delete(lease.key, lease.token), node_timeout,
                                             _scripts.RELEASE)
        except BaseException:  # cancelled: the release is still owed everywhere
            self._release_owed(None, None, lease.key, lease.token, forget_at)
            raise
        return self._released(lease, replies, forget_at, started)

    async def extend(self, lease: RedlockLease, ttl: Seconds, *, additive: bool = False) -> bool:
        """Set the lock's ttl to ``ttl`` from now on a majority (see ``RedlockClient.extend``)."""
        return await run(self._extend_flow(lease, ttl, additive))

    def lock(self, name: str | bytes, ttl: Seconds | None = None, *, blocking: bool = True,
             timeout: Seconds | None = None, token: bytes | None = None,
             auto_renew: bool | AutoRenew | None = None, on_lost: OnLost | None = None,
             max_extensions: int | None = None, fenced: bool = False) -> AsyncRedlockLock:
        """An ``AsyncRedlockLock`` for ``name``: ``async with``, a decorator for coroutines, or
        acquire()/release(). With no ``ttl``: 30 s renewed until released, as for every Lock."""
        ttl, renew = lock_ttl(ttl, auto_renew)
        return AsyncRedlockLock(self, name, ttl, blocking=blocking, timeout=timeout, token=token,
                                auto_renew=renew, on_lost=on_lost, max_extensions=max_extensions,
                                fenced=fenced)

    # -- bulk -----------------------------------------------------------------------------------

    async def acquire_many(self, names: Sequence[str | bytes], ttl: Seconds, *,
                           all_or_nothing: bool = False,
                           tokens: Sequence[bytes] | None = None, auto_renew: bool | AutoRenew = False,
                           on_lost: OnLost | None = None, max_extensions: int | None = None,
                           limit: int | None = None, fenced: bool = False) -> RedlockManyResult:
        """One attempt per name on every master at once, the quorum decided per name (see
        ``RedlockClient.acquire_many``)."""
        flow = self._acquire_many_flow(names, ttl, all_or_nothing, tokens, auto_renew, on_lost,
                                       max_extensions, limit, fenced)
        return await run(flow)

    async def release_many(self, leases: Sequence[RedlockLease]) -> list[bool]:
        """``release`` for every lease, pipelined; True/False per lease in input order."""
        self._refuse_if_closed()
        return await run(release_many_flow(self, leases))

    async def extend_many(self, leases: Sequence[RedlockLease], ttl: Seconds) -> list[bool]:
        """``extend`` for every lease, pipelined; True/False per lease in input order."""
        self._refuse_if_closed()
        return await run(extend_many_flow(self, leases, ttl))

    # -- renewal and lifetime -------------------------------------------------------------------

    def _new_renewer(self) -> AsyncRedlockRenewer:
        return AsyncRedlockRenewer(self)

    async def wait_lost(self, lease: RedlockLease, timeout: Seconds | None = None) -> bool:
        """Wait until the renewer finds an auto-renewed ``lease`` lost: True when it was, False
        when ``timeout`` passed first or the lease was released."""
        lease = self._check_lease(lease)
        for master in self.masters:  # another thread's loop is refused; a new one's renews here
            master._adopt_running_loop()
        lost: bool = await self._renewer().wait_lost(lease, timeout)
        return lost

    async def close(self) -> None:
        """Stop renewing and release every auto-renewed lock, then close the masters opened from
        URLs (each makes one try at its maybe-held releases)."""
        if self._closed:
            return
        self._closed = True
        self._pauses.end_all()  # every blocking acquire ends, not one retry delay later
        try:
            await run(stop_renewing_flow(self))
            # The masters' own maybe-held releases get one try, side by side, for one node timeout:
            # a master still down expires them by their ttl (as the threaded client's close does).
            deadline = time.monotonic() + (self.node_timeout or DEFAULT_NODE_TIMEOUT)
            await asyncio.gather(*(client._close(deadline) for client in self._opened))
            self._close_done = True
        except BaseException:  # cancelled part-way (a shutdown's wait_for): closed all the same, at once
            for client in self._opened:
                if not client.closed:  # one whose close() began closed itself as it was cancelled
                    client._abort()
            self._close_done = True
            raise

    async def _release_renewed(self, leases: list[RedlockLease], deadline: float) -> list[bool]:
        return await run(release_many_flow(self, leases))  # close's own: the client is closing

    async def __aenter__(self) -> AsyncRedlockClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def __repr__(self) -> str:
        return (f"AsyncRedlockClient([{self._addresses()}], quorum={self.quorum}, "
                f"key_prefix={self.key_prefix!r}, core={self.implementation!r})")


class AsyncRedlockLock(AsyncLockCalls, RedlockLockFlows):
    """One Redlock name for asyncio, with the behaviour of every Lock object (see ``RedlockLock``)."""

    kind = "AsyncRedlockLock"

    def __init__(self, client: AsyncRedlockClient, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                 timeout: Seconds | None = None, token: bytes | None = None,
                 auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                 max_extensions: int | None = None, fenced: bool = False) -> None:
        self._setup(name, ttl, blocking, timeout, token, auto_renew, on_lost)
        self._init_redlock(client, max_extensions, fenced)


def _follow_running_loop(master: AsyncLockClient, client: AsyncRedlockClient) -> None:
    """A master's connections moved to the running loop: its own loop-bound parts follow, and
    the Redlock renewal task (``AsyncLockClient._follow_running_loop``)."""
    master._follow_running_loop()
    renewer = client._renewer_instance
    if renewer is not None:
        renewer.follow_running_loop()
