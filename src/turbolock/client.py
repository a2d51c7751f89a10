"""``LockClient``: single locks (try_acquire, release, extend, query) and the bulk API on one server."""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from turbolock import _metrics
from turbolock._flows.bulk_flows import (
    acquire_or_claim_flow,
    extend_many_flow,
    query_many_flow,
    release_many_flow,
)
from turbolock._flows.bulk_result import AcquireManyResult
from turbolock._flows.cleanup_flows import cleanup_flow, owed_release_flow
from turbolock._flows.client_rules import FAIR_WAITERS_GRACE, ClientRules
from turbolock._flows.client_settings import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_KEY_PREFIX,
    check_fenced,
)
from turbolock._flows.closing import stop_renewing_flow
from turbolock._flows.fair import fair_attempt_flow
from turbolock._flows.ownership import forget_parent_locks_after_fork
from turbolock._flows.renewal_book import COMMANDS_PER_WRITE, AutoRenew, Batch, OnLost
from turbolock._flows.single import (
    acquire_result,
    check_flow,
    extend_flow,
    query_flow,
    release_failed,
    release_result,
    releasing,
)
from turbolock._flows.topology import Server
from turbolock._flows.wake_book import Ticket
from turbolock._sync.cleaner import BackgroundCleaner
from turbolock._sync.cluster_waker import ClusterWaker
from turbolock._sync.drive import run, wait_for_abandoned
from turbolock._sync.executor import Executor
from turbolock._sync.pauses import Pauses
from turbolock._sync.pool import ConnectionPool
from turbolock._sync.renewer import Renewer
from turbolock._sync.waker import Waker
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import Encoder, Reencoder, ReplyHandler, Unconfirmed
from turbolock._wire.validate import TOKEN_BYTES, Seconds, check_token, encode_name, ttl_ms
from turbolock.errors import ClientClosedError
from turbolock.lease import Lease, LockInfo
from turbolock.lock import Lock

log = logging.getLogger("turbolock")

DEFAULT_MAX_CONNECTIONS = 32


class LockClient(ClientRules[Lock]):
    """A lock client for one Redis server; thread-safe, with a pool of connections.

    ``timeout`` bounds every call (a bulk call gets it per chunk); ``connect_timeout`` bounds
    opening a connection. Every lock key is ``key_prefix + name``. ``core`` picks the codec:
    "c", "py", or None for the compiled one when it is installed.
    """

    _lock_type = Lock
    _renewer_instance: Renewer | None

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, *,
                 key_prefix: str | bytes = DEFAULT_KEY_PREFIX, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, core: str | None = None, **connection: Any) -> None:
        self._configure(host, port, key_prefix, max_connections, chunk_size, core, connection)
        self._open(max_connections)
        self._cleaner = BackgroundCleaner(self._cleanup, self._release_keys, self.options.timeout)
        self._renewer_lock = threading.Lock()
        self._waker_instance: Waker | ClusterWaker | None = None
        self._pauses = Pauses()
        forget_parent_locks_after_fork(self)

    def _open(self, max_connections: int) -> None:
        """The server side: a pool of connections and the executors over it."""
        options = self.options
        self._pool = ConnectionPool(options, self.core, self.key_prefix, max_connections)
        self._exec: Server = Executor(self._pool, options.timeout, self._chunk_size, self._on_orphan)
        self._exec_renewals: Server = Executor(self._pool, options.timeout, COMMANDS_PER_WRITE,
                                               self._on_orphan)
        self._wakes_waiters = options.wake_waiters

    def _close_connections(self, deadline: float) -> None:
        self._pool.close(deadline)

    def _forget_parent_locks(self) -> None:
        # In a forked child: the parent's leases, renewals and cleanups are the parent's business.
        self._forget_parent_bookkeeping()
        if not self._closed:  # a close under way in the parent is the parent's: renewing goes on here
            self._renewals_stopped = False
        self._cleaner.forget_after_fork()
        self._pauses = Pauses()
        self._renewer_lock = threading.Lock()
        if self._renewer_instance is not None:
            self._renewer_instance.forget_after_fork()
        if self._waker_instance is not None:
            self._waker_instance.forget_after_fork()

    def _new_renewer(self) -> Renewer:
        return Renewer(self)

    def _waker(self) -> Waker | ClusterWaker:
        with self._renewer_lock:
            if self._waker_instance is None:
                if self._closing:  # none made once close began: its connection would outlive it
                    raise ClientClosedError()
                self._waker_instance = self._new_waker()
            return self._waker_instance

    def _new_waker(self) -> Waker | ClusterWaker:
        """The subscriber of this client's waiters: it connects where the pool does."""
        return Waker(self.options, self._pool.open_unpooled)

    # The steps of a blocking acquire woken by releases (``SingleLockFlows._acquire_flow``).
    def _wake_join(self, key: bytes, deadline: float) -> Ticket:
        return self._waker().join(key, deadline)

    def _wake_wait(self, ticket: Ticket, seconds: float) -> bool:
        woken: bool = ticket.home.wait(ticket, seconds)
        return woken

    def _wake_leave(self, ticket: Ticket) -> None:
        ticket.home.leave(ticket)

    def _wake_consume(self, ticket: Ticket) -> None:
        ticket.home.consume(ticket)

    # The steps of a fair Lock object (``SingleLockFlows._fair_acquire_flow``).
    def _fair_attempt(self, name: str | bytes, ttl: Seconds, waiter: bytes, attempt: int,
                      auto_renew: bool | AutoRenew, on_lost: OnLost | None, fenced: bool, queue: bool,
                      deadline: float | None) -> Lease | int | object | None:
        """One attempt of a fair waiter, by ``deadline`` (None: the call's own)."""
        end = time.monotonic() + self.options.timeout if deadline is None else deadline
        return run(fair_attempt_flow(self, name, ttl, waiter, attempt, auto_renew, on_lost, fenced, queue,
                                     end))

    # -- single locks ---------------------------------------------------------------------------

    def try_acquire(self, name: str | bytes, ttl: Seconds, *, token: bytes | None = None,
                    auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                    fenced: bool = False) -> Lease | None:
        """One attempt: a ``Lease`` when the lock was free, None when someone else holds it.

        If the reply is lost after the command went out, the lock may be ours: it is released
        with our token and ``AcquireOutcomeUnknownError`` is raised. With ``auto_renew`` the
        client's renewer keeps the lock until it is released; ``on_lost(lease)`` is called if
        it is ever lost. ``fenced=True`` gives a ``FencedLease``: ``lease.fence`` grows with
        every grant of this name, for the resource to refuse a paused holder's late writes.
        """
        deadline = time.monotonic() + self.options.timeout
        return self._try_acquire(name, ttl, token, auto_renew, on_lost, deadline, fenced)

    def _attempt(self, name: str | bytes, ttl: Seconds, token: bytes | None, auto_renew: bool | AutoRenew,
                 on_lost: OnLost | None, deadline: float | None, fenced: bool = False) -> Lease | None:
        """One attempt of a Lock object, by ``deadline`` (None: the call's own)."""
        if deadline is None:
            deadline = time.monotonic() + self.options.timeout
        if token is not None and len(self._cleanup) and not run(
                owed_release_flow(self, encode_name(name), check_token(token), deadline)):
            return None
        return self._try_acquire(name, ttl, token, auto_renew, on_lost, deadline, fenced)

    def _try_acquire(self, name: str | bytes, ttl: Seconds, token: bytes | None, auto_renew: bool | AutoRenew,
                     on_lost: OnLost | None, deadline: float, fenced: bool = False) -> Lease | None:
        key = encode_name(name)
        ms = ttl_ms(ttl)
        tok = secrets.token_bytes(TOKEN_BYTES) if token is None else check_token(token)
        policy = self._renew_policy(auto_renew, on_lost, ms)
        fenced = fenced is not False and check_fenced(fenced, self.key_prefix, key, self.options.replicas_ack)
        sent_at = time.monotonic()
        try:
            if fenced:
                reply = self._exec.script_one(self._fenced_acquire, key, tok, ms, deadline)
            else:
                reply = self._exec.set_nx_one(key, tok, ms, deadline)
        except Unconfirmed as exc:
            raise self._acquire_lost([(name, key, tok, time.monotonic() + ms / 1000.0)], exc.cause,
                                     token is None) from None
        return acquire_result(self, reply, name, key, tok, ms, sent_at, policy, on_lost)

    def release(self, lease: Lease) -> bool:
        """Delete the lock if it is still ours. False when it expired or is now someone else's
        (their key is never touched)."""
        releasing(self, lease)
        sent_at = time.monotonic() if _metrics.sink is not None else 0.0  # timed only when reported
        try:
            reply = self._exec.script_one(_scripts.RELEASE, lease.key, lease.token, None)
        except BaseException as exc:
            raise release_failed(self, lease, exc) from None
        return release_result(self, reply, lease, sent_at)

    def extend(self, lease: Lease, ttl: Seconds, *, additive: bool = False) -> bool:
        """Set the lock's ttl to ``ttl`` from now if it is still ours; False when it is not (the
        lease is then lost). ``additive=True`` adds ``ttl`` to what the lease has left by the
        local clock instead (redis-py's default), never more than the server has left plus ``ttl``."""
        return run(extend_flow(self, lease, ttl, additive))

    def check(self, lease: Lease) -> float | None:
        """Seconds the lock has left on the server if the lease still holds it, else None (the
        lease is then lost: ``ensure_held()`` raises)."""
        return run(check_flow(self, lease))

    def query(self, name: str | bytes) -> LockInfo:
        """Whether anyone holds ``name`` and for how long still (never whose it is)."""
        return run(query_flow(self, name))

    # -- bulk -----------------------------------------------------------------------------------

    def acquire_many(self, names: Sequence[str | bytes], ttl: Seconds, *, all_or_nothing: bool = False,
                     tokens: Sequence[bytes] | None = None, auto_renew: bool | AutoRenew = False,
                     on_lost: OnLost | None = None, limit: int | None = None,
                     fenced: bool = False) -> AcquireManyResult:
        """Try every name once, pipelined; a result per name in input order.

        ``tokens`` (one per name, 16+ bytes each) replaces the random ones (one fresh random
        token per chunk sent, shared by its names), for holders that must recognise their locks
        after a restart. With ``auto_renew`` every lease taken is
        renewed until released; ``result.lost`` names the ones lost since.
        ``limit=k`` takes at most k *free* names instead, tried from a random point of the list
        (so workers sharing one list spread over it), one round trip per chunk: for workers
        claiming shards. The result's ``not_tried`` lists the names left untried.
        ``fenced=True`` gives ``FencedLease``s (see ``try_acquire``), claims (``limit``) included.
        """
        flow = acquire_or_claim_flow(self, names, ttl, all_or_nothing, tokens, auto_renew, on_lost, limit,
                                     fenced)
        return run(flow)

    def release_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Release each lease that is still ours; True/False per lease in input order."""
        return run(release_many_flow(self, leases))

    def extend_many(self, leases: Sequence[Lease], ttl: Seconds) -> list[bool]:
        """Extend each lease that is still ours to ``ttl`` from now; True/False per lease."""
        return run(extend_many_flow(self, leases, ttl))

    def query_many(self, names: Sequence[str | bytes]) -> list[LockInfo]:
        """``query`` for every name, pipelined, in input order."""
        return run(query_many_flow(self, names))

    # -- maybe-held cleanup ---------------------------------------------------------------------

    def _remember_cleanup(self, key: bytes, token: bytes, forget_at: float, recheck: bool = False) -> None:
        """Release ``key`` with ``token`` in the background, until ``forget_at`` (its key's expiry);
        ``recheck``: see ``CleanupBook.remember``."""
        self._cleanup.remember(key, token, forget_at, recheck)
        self._cleaner.wake()

    _abandoned = _remember_cleanup

    def _many_batched(self, count: int, encode: Encoder, script: _scripts.Script | None,
                      reencode: Reencoder | None, **options: Any) -> list[object]:
        """Multi-key calls (scripts or transactions, each up to a thousand keys), a few per write."""
        return self._exec_renewals.many(count, encode, script, reencode, **options)

    def _renew_batches(self, batches: list[Batch], encode: Encoder, reencode: Reencoder,
                       on_replies: ReplyHandler, deadline: float) -> list[object]:
        """A renewal round's scripts, a few per write (the renewer's flow settles the replies)."""
        return self._exec_renewals.many(len(batches), encode, _scripts.RENEW_MANY, reencode,
                                        on_replies=on_replies, deadline=deadline)

    def _release_renewed(self, leases: list[Lease], deadline: float) -> list[bool]:
        return run(release_many_flow(self, leases, deadline))

    def _release_keys(self, keys: list[bytes], tokens: list[bytes], deadline: float) -> list[object]:
        return run(cleanup_flow(self, keys, tokens, deadline))

    # -- plumbing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop renewing and release every auto-renewed lock still held and the maybe-held ones,
        all within one call deadline, then close every connection."""
        self._close(time.monotonic() + self.options.timeout)

    def _close(self, deadline: float) -> None:
        if self._closed:
            return
        try:
            self._close_within(deadline)
        except BaseException:  # interrupted part-way (Ctrl-C): closed all the same, at once
            self._abort()
            raise

    def _abort(self) -> None:
        """A ``close()`` cut short: closed at once, no call half served by a client whose waits
        ended and whose renewer stopped; what it had not released expires by its ttl."""
        self._closed = True
        self._end_waits()
        renewer = self._stop_renewals()
        if renewer is not None:
            renewer.stop(-math.inf)
        self._cleaner.stop(-math.inf)
        self._close_connections(-math.inf)

    def _close_within(self, deadline: float) -> None:
        self._end_waits()
        run(stop_renewing_flow(self, deadline))
        wait_for_abandoned(deadline)  # an interrupted Cluster call's other shares, still answering
        self._leave_fair_queues()
        self._cleaner.stop(deadline)
        if self._cleanup and deadline > time.monotonic():
            self._cleaner.run_once(deadline)
        self._closed = True
        if self._waker_instance is not None:  # stopped by _end_waits: its thread is waited for
            self._waker_instance.close(deadline)
        self._await_fair_waiters(deadline)
        if self._cleanup and deadline > time.monotonic():  # what they left: the connections still work
            self._cleaner.run_once(deadline)
        self._close_connections(deadline)  # calls waiting for a connection are served first

    def _end_waits(self) -> None:
        """First of all: every waiter ends, woken or polling (a fair one leaving its queue), not
        once close's own releases, which may take its whole deadline, are done."""
        self._closing = True
        self._pauses.end_all()
        with self._renewer_lock:  # a waker made after this would refuse: see _waker
            waker = self._waker_instance
        if waker is not None:
            waker.stop()

    def _await_fair_waiters(self, deadline: float) -> None:
        """Until the fair waiters close woke have left (their leave goes to the last cleanup: an
        attempt of theirs still running could queue them again after ``_leave_fair_queues``)."""
        end = min(deadline, time.monotonic() + FAIR_WAITERS_GRACE)
        while self._fair_waiting and time.monotonic() < end:
            time.sleep(0.001)

    def __enter__(self) -> LockClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

