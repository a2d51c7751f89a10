"""``RedlockClient``: locks held on a majority of independent Redis masters (the Redlock algorithm),
for threads. The algorithm is the flows' (``_flows/redlock_*``); this client drives them on
blocking sockets.

One attempt writes ``SET key token NX PX ttl`` to every master before reading any reply, then
reads each master's reply before its own deadline (the per-node timeout), all on one thread
(see ``_redlock_fanout``). The lock counts only with a quorum (N // 2 + 1 masters) and validity
left: ``ttl - elapsed - drift``, with ``elapsed`` measured on the monotonic clock from before
the first write and ``drift = ttl * drift_factor + 2 ms``. A failed attempt is released on
every master where it may have been taken, then retried after a random delay
until the caller's wait ends (and at most ``retry_count`` times, if set).

Release is compare-and-delete on every master; extend is compare-and-pexpire on a majority that
still holds the lock, within validity (and sets the key again, with the token, where a
restarted master lost it; those never make up the majority).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from turbolock import _metrics
from turbolock._flows.client_settings import DEFAULT_CHUNK_SIZE
from turbolock._flows.closing import CallsUnderWay, stop_renewing_flow
from turbolock._flows.lock_rules import lock_ttl
from turbolock._flows.ownership import Owner, forget_parent_locks_after_fork
from turbolock._flows.redlock_bulk import extend_many_flow, release_many_flow
from turbolock._flows.redlock_flows import RedlockFlows
from turbolock._flows.redlock_result import (
    FencedRedlockLease,
    InstanceSummary,
    RedlockLease,
    RedlockManyResult,
    RedlockResult,
    RedlockStatus,
)
from turbolock._flows.redlock_rules import (
    CLEANUP_GRACE,
    DEFAULT_DRIFT_FACTOR,
    DEFAULT_NODE_TIMEOUT,
    DEFAULT_RETRY_DELAY,
    TRIED_AS_IT_CLOSES,
)
from turbolock._flows.renewal_book import AutoRenew, OnLost
from turbolock._flows.steps import Flow
from turbolock._redlock.fanout import fan_out, fan_out_one
from turbolock._redlock.links import Links
from turbolock._redlock.masters import take_masters
from turbolock._sync.drive import run
from turbolock._sync.pauses import Pauses
from turbolock._wire import scripts as _scripts
from turbolock._wire.validate import Seconds
from turbolock.client import LockClient
from turbolock.lease import LockInfo

if TYPE_CHECKING:
    from turbolock._redlock.lock import RedlockLock
    from turbolock._redlock.renewer import RedlockRenewer

log = logging.getLogger("turbolock.redlock")
T = TypeVar("T")


class RedlockClient(RedlockFlows):
    """Locks on a majority of ``masters``: three or more independent Redis servers, as URLs
    (``redis://``, ``rediss://``, ``unix://``) or ``LockClient``s. Thread-safe.

    ``node_timeout``: the longest wait for one master's reply (default: 50 ms, or a tenth of
    the ttl when that is shorter); a bulk chunk of up to ``chunk_size`` commands (and a renewal
    round) may take a tenth of the ttl, at most 1 s, if that is longer. ``retry_delay``: a
    blocking acquire retries after a random delay of up to ``retry_delay`` seconds until its
    ``timeout`` (None: until it is taken); ``retry_count`` also limits how many times.
    ``drift_factor``: the share of the ttl set aside for clock drift.
    ``key_prefix``, ``core``, ``chunk_size`` and further keywords (``connect_timeout``,
    ``password``...) apply to the masters given as URLs; LockClients keep their own settings
    and stay open after ``close()``.
    """

    _closing_fate = TRIED_AS_IT_CLOSES  # close() serves the calls under way, then tries their debts once

    def __init__(self, masters: Sequence[str | LockClient], *, node_timeout: Seconds | None = None,
                 retry_count: int | None = None, retry_delay: Seconds = DEFAULT_RETRY_DELAY,
                 drift_factor: float = DEFAULT_DRIFT_FACTOR, key_prefix: str | bytes | None = None,
                 core: str | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE, **connection: Any) -> None:
        self._configure(node_timeout, retry_count, retry_delay, drift_factor)
        take_masters(self, masters, key_prefix, core, chunk_size, LockClient, connection)
        self._links = Links(self.masters)
        # The flows' fan-outs (``_flows/steps``), on blocking sockets; partials, not methods:
        # one Python frame less per fan-out (measured on Redlock pairs).
        self._fan_one = partial(fan_out_one, self._links)
        self._fan_many = partial(fan_out, self._links)
        self._renewer_instance: RedlockRenewer | None = None
        self._renewer_lock = threading.Lock()
        self._closed = False
        self._close_done = False
        self._pauses = Pauses()
        # Each call under way, until its bookkeeping is done (``_serve``): what close() waits for.
        self._calls = CallsUnderWay()
        forget_parent_locks_after_fork(self)

    def _forget_parent_locks(self) -> None:
        if self._closed and not self._close_done:  # a close under way in the parent is the parent's
            self._closed = False
            self._renewals_stopped = False
        self._owner = Owner()
        self._calls = CallsUnderWay()  # the parent's calls under way, none of them the child's
        self._pauses = Pauses()
        self._renewer_lock = threading.Lock()
        if self._renewer_instance is not None:
            self._renewer_instance.forget_after_fork()

    # -- single locks ---------------------------------------------------------------------------

    def acquire(self, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                timeout: Seconds | None = None, token: bytes | None = None,
                auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                max_extensions: int | None = None, fenced: bool = False) -> RedlockResult:
        """Take ``name`` on a majority of the masters; the result says how it went.

        Retries (``blocking=True``) after a random delay until ``timeout`` seconds have passed
        (None: until the lock is taken, as every Lock waits; 0 or ``blocking=False``: one
        attempt), and at most ``retry_count`` times if the client has one. ``max_extensions``
        limits how often the lease may be extended, by hand or by auto-renewal. Never raises for
        what the masters said about the lock: read ``result.status``; ``AuthenticationError``
        (or ``ResponseError``, NOPERM) when masters refusing this client leave too few for a
        quorum, which no retry could reach.
        """
        flow = self._acquire_flow(name, ttl, blocking, timeout, token, auto_renew, on_lost, max_extensions,
                                  fenced)
        return self._serve(flow)

    def try_acquire(self, name: str | bytes, ttl: Seconds, *, token: bytes | None = None,
                    auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                    max_extensions: int | None = None, fenced: bool = False) -> RedlockLease | None:
        """One attempt: a ``RedlockLease``, or None when a quorum of masters answered and fewer
        than a quorum granted it, others holding it on the rest (Conflicted: RedLock.net's rule;
        a master that did not answer counts for neither side) or the attempt used up its
        validity (Expired).

        ``QuorumError`` (with ``.result``) when fewer than a quorum of masters answered
        (NoQuorum); what was taken is released again first, on every master.
        """
        attempt = self._attempting(name, ttl, token, auto_renew, on_lost, max_extensions, fenced)
        key, tok, ms, _, node_timeout, _, policy, _ = attempt
        if token is not None or self._closed:  # a token reused, or a closed client: the flow's checks
            result = self._serve(self._attempt_flow(name, attempt, 1))
            lease = self._tried(result)
            self._taken(result, policy, on_lost)
            return lease
        started = time.monotonic()
        serving = self._calls.entries
        serving.append(None)
        try:
            try:
                replies, failures = self._fan_one(*self._attempt_call(attempt))
            except BaseException:  # interrupted: it may have taken the lock anywhere
                self._abandoned(key, tok, started + ms / 1000.0 + CLEANUP_GRACE, True)
                raise
            result, granted = self._attempted(name, attempt, started, replies, failures, 1, True)
            if granted:
                run(self._give_back_flow(granted, key, tok, started, ms, node_timeout))
        finally:
            serving.pop()
        lease = self._tried(result)
        self._taken(result, policy, on_lost)
        return lease

    def query(self, name: str | bytes) -> LockInfo:
        """Whether a quorum of masters holds ``name``, and for how long at least a quorum still
        will (never whose it is). ``QuorumError`` when the masters that did not answer could make
        it either."""
        return self._serve(self._query_flow(name))

    def check(self, lease: RedlockLease) -> float | None:
        """Seconds a majority of masters still holds the lock for ``lease`` (the quorum-th longest
        remaining ttl among the masters where it is ours), None when fewer than a majority do,
        even counting every master that did not answer as one. ``QuorumError`` when those could
        make it either."""
        return self._serve(self._check_flow(lease))

    def release(self, lease: RedlockLease) -> bool:
        """Delete the lock on every master where it is still ours. True when that was a majority;
        False when it was no longer ours on enough of them (expired, or taken since).

        ``QuorumError`` when too many masters failed to answer to tell; the release is retried
        on them when they answer again.
        """
        lease, node_timeout, forget_at = self._releasing(lease)
        started = time.monotonic() if _metrics.sink is not None else 0.0  # timed only when reported
        serving = self._calls.entries
        serving.append(None)
        try:
            try:
                replies, _ = self._fan_one(self._compare_delete(lease.key, lease.token), node_timeout,
                                           _scripts.RELEASE)
            except BaseException:  # interrupted: the release is still owed everywhere
                self._release_owed(None, None, lease.key, lease.token, forget_at)
                raise
            return self._released(lease, replies, forget_at, started)
        finally:
            serving.pop()

    def extend(self, lease: RedlockLease, ttl: Seconds, *, additive: bool = False) -> bool:
        """Set the lock's ttl to ``ttl`` from now on every master where it is ours (and again where
        a master lost it). True with a majority and validity left; False when it is no longer
        ours on enough masters or when its validity had already ended (nothing is sent then).

        ``ExtensionLimitError`` past ``max_extensions``; ``QuorumError`` when too many masters
        failed to answer to tell. ``additive=True`` adds ``ttl`` to the validity left instead.
        """
        return self._serve(self._extend_flow(lease, ttl, additive))

    def lock(self, name: str | bytes, ttl: Seconds | None = None, *, blocking: bool = True,
             timeout: Seconds | None = None, token: bytes | None = None,
             auto_renew: bool | AutoRenew | None = None, on_lost: OnLost | None = None,
             max_extensions: int | None = None, fenced: bool = False) -> RedlockLock:
        """A ``RedlockLock`` for ``name``: ``with`` block, decorator, or explicit acquire()/release().
        With no ``ttl``: 30 s renewed until released, as for every Lock."""
        from turbolock._redlock.lock import RedlockLock

        ttl, renew = lock_ttl(ttl, auto_renew)
        return RedlockLock(self, name, ttl, blocking=blocking, timeout=timeout, token=token,
                           auto_renew=renew, on_lost=on_lost, max_extensions=max_extensions,
                           fenced=fenced)

    # -- bulk -----------------------------------------------------------------------------------

    def acquire_many(self, names: Sequence[str | bytes], ttl: Seconds, *, all_or_nothing: bool = False,
                     tokens: Sequence[bytes] | None = None, auto_renew: bool | AutoRenew = False,
                     on_lost: OnLost | None = None, max_extensions: int | None = None,
                     limit: int | None = None, fenced: bool = False) -> RedlockManyResult:
        """One attempt per name, pipelined to every master at once, the quorum decided per name;
        a result per name in input order. Names not acquired are released on every master.
        Never raises for what the masters said: see ``result.statuses``.
        ``limit=k`` takes at most k *free* names instead, from a random point of the list, in chunks
        of at most the names still wanted (for workers claiming shards); see ``result.not_tried``."""
        return self._serve(self._acquire_many_flow(names, ttl, all_or_nothing, tokens, auto_renew, on_lost,
                                                   max_extensions, limit, fenced))

    def release_many(self, leases: Sequence[RedlockLease]) -> list[bool]:
        """``release`` for every lease, pipelined; True/False per lease in input order.
        ``QuorumError`` (after all were tried) lists the leases no majority answered for."""
        self._refuse_if_closed()
        return self._serve(release_many_flow(self, leases))

    def extend_many(self, leases: Sequence[RedlockLease], ttl: Seconds) -> list[bool]:
        """``extend`` for every lease, pipelined; True/False per lease in input order."""
        self._refuse_if_closed()
        return self._serve(extend_many_flow(self, leases, ttl))

    # -- renewal and lifetime -------------------------------------------------------------------

    def _new_renewer(self) -> RedlockRenewer:
        from turbolock._redlock.renewer import RedlockRenewer

        return RedlockRenewer(self)

    def _serve(self, flow: Flow[T]) -> T:
        """``run(flow)``, counted as a call under way until its bookkeeping is done (the releases
        it leaves owed recorded), not only until its connections are back: close() waits for it."""
        return run(self._calls.counted(flow))

    def close(self) -> None:
        """Stop renewing and release every auto-renewed lock, serve the calls other threads have
        under way (for one node timeout at most), make one try at the maybe-held releases still
        pending (theirs too, for another node timeout at most), then close the masters opened
        from URLs."""
        if self._closed:
            return
        self._closed = True
        self._pauses.end_all()  # every blocking acquire ends, not one retry delay later
        run(stop_renewing_flow(self))
        node_timeout = self.node_timeout or DEFAULT_NODE_TIMEOUT
        deadline = time.monotonic() + node_timeout
        self._links.close()
        run(self._calls.ended_flow(deadline))  # the calls other threads have under way end first
        pending = [m for m, client in enumerate(self.masters) if client._cleanup]  # theirs too
        if pending:
            def ping(buf: Any) -> None:
                buf.append_command((b"PING",))

            fan_out_one(self._links, ping, node_timeout, None, pending)
        for client in self._opened:  # a master still down: its maybe-held keys expire by their ttl
            client._cleanup.clear()
            client._close(deadline)
        self._close_done = True

    def _release_renewed(self, leases: list[RedlockLease], deadline: float) -> list[bool]:
        return run(release_many_flow(self, leases))  # close's own: the client is closing

    def __enter__(self) -> RedlockClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"RedlockClient([{self._addresses()}], quorum={self.quorum}, key_prefix={self.key_prefix!r}, "
                f"core={self.implementation!r})")


__all__ = ["FencedRedlockLease", "InstanceSummary", "RedlockClient", "RedlockLease", "RedlockManyResult",
           "RedlockResult", "RedlockStatus"]
