"""``AsyncLockClient``: the whole API of ``LockClient`` for asyncio, on the same sans-IO core.

Every method that talks to the server is a coroutine; arguments, validation, results and
errors are the blocking client's. Commands issued by many tasks in one loop iteration leave
in one write (see ``protocol``). A task cancelled while acquiring never leaves a lock behind:
a lock its command took for nobody is released with its token as soon as the reply shows it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
from collections.abc import Awaitable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from turbolock import _metrics
from turbolock._aio.cluster_waker import AsyncClusterWaker
from turbolock._aio.drive import run
from turbolock._aio.executor import Executor, abandon
from turbolock._aio.pauses import Pauses
from turbolock._aio.pool import ConnectionPool
from turbolock._aio.renewer import OnLost, Renewer
from turbolock._aio.tokens import TokenSource
from turbolock._aio.waiting import done_by, finished_within, run_within
from turbolock._aio.waker import AsyncWaker
from turbolock._flows.bulk_flows import (
    acquire_or_claim_flow,
    extend_many_flow,
    query_many_flow,
    release_many_flow,
)
from turbolock._flows.bulk_plan import OwnTokensTag
from turbolock._flows.bulk_result import AcquireManyResult
from turbolock._flows.cleanup_book import retry_delay
from turbolock._flows.cleanup_flows import cleanup_flow, owed_release_flow
from turbolock._flows.client_rules import FAIR_WAITERS_GRACE, ClientRules
from turbolock._flows.client_settings import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_KEY_PREFIX,
    check_fenced,
)
from turbolock._flows.closing import stop_renewing_flow
from turbolock._flows.fair import fair_attempt_flow
from turbolock._flows.lock_flows import give_back
from turbolock._flows.ownership import forget_parent_locks_after_fork
from turbolock._flows.renewal_book import COMMANDS_PER_WRITE, AutoRenew, Batch
from turbolock._flows.single import (
    acquire_result,
    check_flow,
    extend_flow,
    query_flow,
    release_failed,
    release_result,
    releasing,
)
from turbolock._flows.topology import AsyncServer
from turbolock._flows.wake_book import Ticket
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import UNKNOWN, Encoder, NotSent, Reencoder, ReplyHandler, Unconfirmed
from turbolock._wire.validate import Seconds, check_token, encode_name, ttl_ms
from turbolock.asyncio.lock import AsyncLock
from turbolock.errors import (
    ClientClosedError,
    LockError,
)
from turbolock.lease import Lease, LockInfo

T = TypeVar("T")

log = logging.getLogger("turbolock")

DEFAULT_MAX_CONNECTIONS = 1
"""Pipelining connections per client. One carries any number of tasks' commands, one write per
loop iteration; measured with 64 tasks, a second one cost 10-25% of the pairs per second (two
writes per iteration instead of one). More help when bulk calls would hold up small ones."""


class AsyncLockClient(ClientRules[AsyncLock]):
    """A lock client for one Redis server, for asyncio; share one per event loop.

    ``timeout`` bounds every call (a bulk call gets it per chunk); ``connect_timeout`` bounds
    opening a connection. Every lock key is ``key_prefix + name``. ``core`` picks the codec:
    "c", "py", or None for the compiled one when it is installed. ``max_connections`` is how
    many pipelining connections it keeps (each carries any number of concurrent calls).
    Connections are opened on first use, in the running loop; the client belongs to that loop.
    """

    _lock_type = AsyncLock
    _renewer_instance: Renewer | None

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, *,
                 key_prefix: str | bytes = DEFAULT_KEY_PREFIX, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, core: str | None = None, **connection: Any) -> None:
        self._configure(host, port, key_prefix, max_connections, chunk_size, core, connection)
        self._open(max_connections)
        self._tokens = TokenSource()
        self._cleanup_runner: asyncio.Task[None] | None = None
        self._closing_connections: asyncio.Future[None] | None = None
        self._waker_instance: AsyncWaker | AsyncClusterWaker | None = None
        self._pauses = Pauses()
        self._parents: list[Any] = []  # a forked child's: the parent's renewer and waker, set aside
        forget_parent_locks_after_fork(self)

    def _open(self, max_connections: int) -> None:
        """The server side: the pipelining connections and the executor over them."""
        self._pool = ConnectionPool(self.options, self.core, self.key_prefix, max_connections,
                                    self._on_orphan)
        self._pool.on_new_loop = self._follow_running_loop
        self._direct = Executor(self._pool, self._chunk_size)
        """The executor over the connections ``try_acquire`` writes on itself (a cluster client's
        acquires go through its ``_exec``)."""
        self._exec: AsyncServer = self._direct
        self._wakes_waiters = self.options.wake_waiters

    @property
    def max_connections(self) -> int:
        return self._pool.size

    def _new_renewer(self) -> Renewer:
        return Renewer(self)

    def _waker(self) -> AsyncWaker | AsyncClusterWaker:
        if self._waker_instance is None:
            if self._closing:  # none made once close began: its connection would outlive it
                raise ClientClosedError()
            self._waker_instance = self._new_waker()
        return self._waker_instance

    def _follow_running_loop(self) -> None:
        """The connections moved to the running loop (the one they were in is closed, or idle):
        the subscriber of that loop is dropped (the next waiter makes one here) and the renewal
        task starts again here, so an auto-renewed lock held across ``asyncio.run()`` calls is
        still renewed, or reported lost."""
        waker = self._waker_instance
        if waker is not None and not waker.in_running_loop():
            self._waker_instance = None
            waker.abandon()
        renewer = self._renewer_instance
        if renewer is not None:
            renewer.follow_running_loop()
        if len(self._cleanup):  # releases owed when the last loop ended go on here
            self._start_cleanup()

    def _new_waker(self) -> AsyncWaker | AsyncClusterWaker:
        """The subscriber of this client's waiters: it connects where the pool does."""
        return AsyncWaker(self.options, self._pool.open_unpooled)

    # The steps of a blocking acquire woken by releases (``SingleLockFlows._acquire_flow``).
    async def _wake_join(self, key: bytes, deadline: float) -> Ticket:
        return await self._waker().join(key, deadline)

    async def _wake_wait(self, ticket: Ticket, seconds: float) -> bool:
        woken: bool = await ticket.home.wait(ticket, seconds)
        return woken

    def _wake_leave(self, ticket: Ticket) -> None:
        ticket.home.leave(ticket)

    def _wake_consume(self, ticket: Ticket) -> None:
        ticket.home.consume(ticket)

    # The steps of a fair Lock object (``SingleLockFlows._fair_acquire_flow``).
    def _fair_attempt(self, name: str | bytes, ttl: Seconds, waiter: bytes, attempt: int,
                      auto_renew: bool | AutoRenew, on_lost: OnLost | None, fenced: bool, queue: bool,
                      deadline: float | None) -> Awaitable[Lease | int | object | None]:
        """One attempt of a fair waiter, by ``deadline`` (None: the call's own); one cut short
        is None, and a lock it may have taken is released in the background."""
        attempt_flow = run(fair_attempt_flow(self, name, ttl, waiter, attempt, auto_renew, on_lost, fenced,
                                             queue, deadline))
        return attempt_flow if deadline is None else self._attempt_by(attempt_flow, deadline)

    # -- single locks ---------------------------------------------------------------------------

    async def try_acquire(self, name: str | bytes, ttl: Seconds, *, token: bytes | None = None,
                          auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                          fenced: bool = False) -> Lease | None:
        """One attempt: a ``Lease`` when the lock was free, None when someone else holds it.

        If the reply is lost after the command went out, the lock may be ours: it is released
        with our token and ``AcquireOutcomeUnknownError`` is raised. If the calling task is
        cancelled after the command went out, a lock it took is released once the reply comes.
        With ``auto_renew`` the client's renewer keeps the lock until it is released;
        ``on_lost(lease)`` (a function or a coroutine function) is called if it is ever lost.
        ``fenced=True`` gives a ``FencedLease`` (see ``LockClient.try_acquire``).
        """
        key = encode_name(name)
        ms = ttl_ms(ttl)
        tok = self._tokens.take() if token is None else check_token(token)
        policy = self._renew_policy(auto_renew, on_lost, ms)
        if fenced is not False and check_fenced(fenced, self.key_prefix, key, self.options.replicas_ack):
            return await self._acquire_by_exec(name, key, tok, ms, policy, on_lost, fenced=True,
                                               own_token=token is None)
        if self._direct.guarded or self._direct.wait is not None:
            # A Sentinel's master (READONLY is resent, a failure asks them again), or WAIT for replicas
            return await self._acquire_by_exec(name, key, tok, ms, policy, on_lost, fenced=False,
                                               own_token=token is None)
        conn, since = self._pool.ready(), None
        if conn is None:
            conn, since = await self._pool.connect_since()
        conn.buffer.append_set_nx_px(key, tok, ms)
        sent_at = time.monotonic()
        tag = (key, tok, ms) if token is not None else OwnTokensTag((key, tok, ms))
        try:
            fut = conn.submit(1, tag, since)
        except NotSent as exc:
            raise exc.cause from None
        try:
            reply = await fut
        except NotSent as exc:
            raise exc.cause from None
        except asyncio.CancelledError:
            abandon(fut, tag, self._on_orphan)
            raise
        except BaseException as exc:
            raise self._acquire_lost([(name, key, tok, time.monotonic() + ms / 1000.0)], exc,
                                     token is None) from None
        return acquire_result(self, reply, name, key, tok, ms, sent_at, policy, on_lost)

    async def _acquire_by_exec(self, name: str | bytes, key: bytes, token: bytes, ms: int,
                               policy: AutoRenew | None, on_lost: OnLost | None,
                               *, fenced: bool, own_token: bool) -> Lease | None:
        """The acquire through the client's executors (the master's they guard: a Sentinel's),
        ``FENCED_ACQUIRE`` for a ``FencedLease``: a Lease or None. ``own_token``: made by this
        client (see ``_acquire_lost``)."""
        sent_at = time.monotonic()
        try:  # cancelled after it went out: Unconfirmed, and the lock is released in the background
            if fenced:
                reply = await self._exec.script_one(self._fenced_acquire, key, token, ms)
            else:
                reply = await self._direct.set_nx_one(key, token, ms, own_token=own_token)
        except Unconfirmed as exc:
            forget_at = time.monotonic() + ms / 1000.0
            raise self._acquire_lost([(name, key, token, forget_at)], exc.cause, own_token) from None
        return acquire_result(self, reply, name, key, token, ms, sent_at, policy, on_lost)

    def _attempt(self, name: str | bytes, ttl: Seconds, token: bytes | None, auto_renew: bool | AutoRenew,
                 on_lost: OnLost | None, deadline: float | None,
                 fenced: bool = False) -> Awaitable[Lease | None]:
        """One attempt of a Lock object, by ``deadline`` (None: the call's own); one cut short
        is None, and a lock it may have taken is released in the background."""
        if token is not None and len(self._cleanup):  # the owed release and the attempt, by one deadline
            end = time.monotonic() + self.options.timeout if deadline is None else deadline
            owing = self._attempt_owing(name, ttl, token, auto_renew, on_lost, fenced, end)
            return self._attempt_by(owing, end)
        attempt = self.try_acquire(name, ttl, token=token, auto_renew=auto_renew, on_lost=on_lost,
                                   fenced=fenced)
        if deadline is None:
            return attempt  # awaited by the Lock's driver: no coroutine of its own
        return self._attempt_by(attempt, deadline)

    async def _attempt_owing(self, name: str | bytes, ttl: Seconds, token: bytes,
                             auto_renew: bool | AutoRenew, on_lost: OnLost | None, fenced: bool,
                             deadline: float) -> Lease | None:
        """``_attempt`` with a token this client may owe a release with (``owed_release_flow``)."""
        if not await run(owed_release_flow(self, encode_name(name), check_token(token), deadline)):
            return None
        return await self.try_acquire(name, ttl, token=token, auto_renew=auto_renew, on_lost=on_lost,
                                      fenced=fenced)

    async def _attempt_by(self, attempt: Awaitable[T], deadline: float) -> T | None:
        if deadline <= time.monotonic():  # its wait is over before it began: nothing is sent
            if inspect.iscoroutine(attempt):
                attempt.close()
            return None
        task = asyncio.ensure_future(attempt)
        try:
            finished = await finished_within(task, deadline - time.monotonic())
        except BaseException:  # cancelled: the attempt goes too, and a lock it already took goes back
            task.cancel()
            if task.done() and not task.cancelled() and task.exception() is None:
                lease = task.result()
                if isinstance(lease, Lease):
                    give_back(self, lease)
            raise
        if not finished:
            task.cancel()  # a lock it may have taken is released when its reply comes
            return None
        return task.result()

    async def release(self, lease: Lease) -> bool:
        """Delete the lock if it is still ours. False when it expired or is now someone else's
        (their key is never touched). A release whose task is cancelled once it has started is
        finished in the background."""
        releasing(self, lease)
        sent_at = time.monotonic() if _metrics.sink is not None else 0.0  # timed only when reported
        try:
            reply = await self._exec.script_one(_scripts.RELEASE, lease.key, lease.token, None)
        except BaseException as exc:
            raise release_failed(self, lease, exc) from None
        return release_result(self, reply, lease, sent_at)

    async def extend(self, lease: Lease, ttl: Seconds, *, additive: bool = False) -> bool:
        """Set the lock's ttl to ``ttl`` from now if it is still ours; False when it is not (the
        lease is then lost). ``additive=True`` adds ``ttl`` to what the lease has left instead."""
        return await run(extend_flow(self, lease, ttl, additive))

    async def check(self, lease: Lease) -> float | None:
        """Seconds the lock has left on the server if the lease still holds it, else None (the
        lease is then lost: ``ensure_held()`` raises)."""
        return await run(check_flow(self, lease))

    async def query(self, name: str | bytes) -> LockInfo:
        """Whether anyone holds ``name`` and for how long still (never whose it is)."""
        return await run(query_flow(self, name))

    async def wait_lost(self, lease: Lease, timeout: Seconds | None = None) -> bool:
        """Wait until the renewer finds an auto-renewed ``lease`` lost: True when it was (or is),
        False when ``timeout`` passed first or the lease was released. The asyncio counterpart
        of ``lease.lost.wait()``."""
        self._check_lease(lease)
        self._adopt_running_loop()  # another thread's loop is refused; a new one's renews here
        lost: bool = await self._renewer().wait_lost(lease, timeout)
        return lost

    # -- bulk -----------------------------------------------------------------------------------

    async def acquire_many(self, names: Sequence[str | bytes], ttl: Seconds, *, all_or_nothing: bool = False,
                           tokens: Sequence[bytes] | None = None, auto_renew: bool | AutoRenew = False,
                           on_lost: OnLost | None = None, limit: int | None = None,
                           fenced: bool = False) -> AcquireManyResult:
        """Try every name once, pipelined; a result per name in input order (see
        ``LockClient.acquire_many``)."""
        flow = acquire_or_claim_flow(self, names, ttl, all_or_nothing, tokens, auto_renew, on_lost, limit,
                                     fenced)
        return await run(flow)

    async def release_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Release each lease that is still ours; True/False per lease in input order."""
        return await run(release_many_flow(self, leases))

    async def extend_many(self, leases: Sequence[Lease], ttl: Seconds) -> list[bool]:
        """Extend each lease that is still ours to ``ttl`` from now; True/False per lease."""
        return await run(extend_many_flow(self, leases, ttl))

    async def query_many(self, names: Sequence[str | bytes]) -> list[LockInfo]:
        """``query`` for every name, pipelined, in input order."""
        return await run(query_many_flow(self, names))

    # -- maybe-held cleanup ---------------------------------------------------------------------

    async def _many_batched(self, count: int, encode: Encoder, script: _scripts.Script | None,
                            reencode: Reencoder | None, **options: Any) -> list[object]:
        """Multi-key calls (scripts or transactions, each up to a thousand keys), a few per write."""
        return await self._exec.many(count, encode, script, reencode, chunk_size=COMMANDS_PER_WRITE,
                                     **options)

    async def _renew_batches(self, batches: list[Batch], encode: Encoder, reencode: Reencoder,
                             on_replies: ReplyHandler, deadline: float) -> list[object]:
        """A renewal round's scripts, a few per write; what got no reply by ``deadline`` may have run.
        The replies are settled once all are in (``on_replies`` is not used): on the connection
        every task shares, settling a thousand leases between two replies would hold up the rest
        of the round past its deadline."""
        sending = self._exec.many(len(batches), encode, _scripts.RENEW_MANY, reencode,
                                  chunk_size=COMMANDS_PER_WRITE)
        return await self._round_by(sending, len(batches), deadline)

    @staticmethod
    async def _round_by(sending: Awaitable[Sequence[object]], count: int, deadline: float) -> list[object]:
        """A round's ``count`` batch replies by ``deadline``, or all of them ``UNKNOWN`` (the
        round is cut short: whatever was sent may have run)."""
        finished, replies = await run_within(sending, deadline - time.monotonic())
        if finished and replies is not None:
            return list(replies)
        log.warning("turbolock: renewal of %d batches got no answer in time", count)
        return [UNKNOWN] * count

    async def _release_renewed(self, leases: list[Lease], deadline: float) -> list[bool]:
        """``close()``'s release of the renewed locks, by its deadline (what gets no answer by
        then is owed in the background, or expires by its ttl)."""
        return await done_by(self.release_many(leases), deadline, f"{self._server()} (close)")

    def _server(self) -> str:
        """Who this client's calls go to, for messages (a Sentinel client's: its master)."""
        return self._pool.server

    def _remember_cleanup(self, key: bytes, token: bytes, forget_at: float, recheck: bool = False) -> None:
        """Release ``key`` with ``token`` in the background, until ``forget_at`` (its key's expiry);
        ``recheck``: see ``CleanupBook.remember``."""
        self._cleanup.remember(key, token, forget_at, recheck)
        self._start_cleanup()

    def _start_cleanup(self) -> None:
        """The background release task, running in the running loop."""
        if self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # from a weakref callback outside the loop: the next round starts it
            return
        runner = self._cleanup_runner
        if runner is None or runner.done() or runner.get_loop() is not loop:
            self._cleanup_runner = loop.create_task(self._cleanup_in_background())

    _abandoned = _remember_cleanup

    async def _cleanup_in_background(self) -> None:
        """Release what is pending until nothing is left, backing off while the server does not
        answer; entries are dropped once their key has expired. No call ever waits for it."""
        delay: float | None = None
        book = self._cleanup
        while book and not self._closed:
            if await self._cleanup_once():
                delay = None
                continue
            delay = retry_delay(delay)
            expiry = book.next_expiry()
            if expiry is not None:
                delay = min(delay, max(0.0, expiry - time.monotonic()))
            await asyncio.sleep(delay)

    async def _cleanup_once(self) -> bool:
        """One pipelined release of everything pending; True when nothing is left."""
        entries = self._cleanup.take()
        if not entries:
            return not self._cleanup  # rechecks not due yet: the task waits for them
        replies: list[object] | None = None
        try:
            replies = await run(cleanup_flow(self, [e[0] for e in entries], [e[1] for e in entries]))
        except LockError as exc:
            log.debug("turbolock: release of %d maybe-held locks failed: %s", len(entries), exc)
        finally:
            self._cleanup.settle(entries, replies)
        return not self._cleanup

    # -- plumbing -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop renewing and release every auto-renewed lock still held, release maybe-held
        locks (one try), then close every connection."""
        await self._close(time.monotonic() + self.options.timeout)

    async def _close(self, deadline: float) -> None:
        """``close()`` with what waits (the renewer's releases, the maybe-held ones) ending by
        ``deadline``."""
        if self._closed:
            return
        self._adopt_running_loop()  # LockUsageError before anything is touched, if it must
        try:
            await self._close_within(deadline)
        except BaseException:  # cancelled part-way (a shutdown's wait_for): closed all the same, at once
            self._abort()
            raise

    async def _close_within(self, deadline: float) -> None:
        # First of all, every waiter ends, woken or polling (a fair one leaving its queue), not
        # once close's own releases, which may take its whole deadline, are done; no subscriber
        # is made from here on (see _waker).
        self._closing = True
        self._pauses.end_all()
        if self._waker_instance is not None:
            await self._waker_instance.close()
        await run(stop_renewing_flow(self, deadline))
        self._leave_fair_queues()
        await self._last_cleanup(deadline)
        self._closed = True
        runner = self._cleanup_runner
        if runner is not None and not runner.done() and runner.get_loop() is asyncio.get_running_loop():
            runner.cancel()
            await asyncio.wait([runner])
        # Until the woken fair waiters have left (an attempt of theirs still running could queue
        # them again after _leave_fair_queues), then what they left goes: the connections work.
        end = min(deadline, time.monotonic() + FAIR_WAITERS_GRACE)
        while self._fair_waiting and time.monotonic() < end:
            await asyncio.sleep(0.001)
        for pool in self._connection_pools():  # what cancelled acquires took goes in that cleanup
            await pool.orphans_answered(deadline)
        await self._last_cleanup(deadline)
        await self._close_connections(deadline)  # the calls in flight are answered first

    def _abort(self) -> None:
        """A ``close()`` cut short: closed at once (no call is half served by a client whose
        renewer stopped), the rest of the closing left to a task."""
        self._closed = True
        self._pauses.end_all()
        renewer = self._stop_renewals()
        if renewer is not None:  # cancelled before close stopped it (while its waiters ended)
            renewer.abort()
        for pool in self._connection_pools():
            pool.abort()
        self._closing_connections = asyncio.ensure_future(self._close_connections())

    async def _last_cleanup(self, deadline: float) -> None:
        """One try at what is pending, by ``deadline`` (close's)."""
        if not self._cleanup:
            return
        try:
            finished, _ = await run_within(self._cleanup_once(), deadline - time.monotonic())
            if not finished:
                log.debug("turbolock: cleanup at close failed: no answer before the deadline")
        except LockError as exc:
            log.debug("turbolock: cleanup at close failed: %s", exc)

    async def _close_connections(self, deadline: float = -math.inf) -> None:
        await self._pool.close(deadline)

    def _adopt_running_loop(self) -> None:
        self._pool.adopt_running_loop()

    def _connection_pools(self) -> list[ConnectionPool]:
        return [self._pool]

    def _forget_parent_locks(self) -> None:
        # In a forked child: the parent's leases, renewals, cleanups and connections are the
        # parent's (their tasks and sockets belong to its event loop, never touched here).
        self._forget_parent_bookkeeping()
        if not self._closed:  # a close under way in the parent is the parent's: renewing goes on here
            self._renewals_stopped = False
        self._parents.append((self._renewer_instance, self._waker_instance, self._cleanup_runner))
        self._renewer_instance = self._waker_instance = self._cleanup_runner = None
        self._pauses = Pauses()
        for pool in self._connection_pools():
            pool.forget_after_fork()

    async def __aenter__(self) -> AsyncLockClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

