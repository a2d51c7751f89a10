"""``RedlockClient``: locks held on a majority of independent Redis masters (the Redlock algorithm).

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
import math
import random
import secrets
import threading
import time
from collections.abc import Sequence
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

from . import _core, _redlock_bulk, _scripts, bulk
from ._executor import UNKNOWN
from ._lock_rules import check_wait, lock_ttl
from ._ownership import Owner, check_lease, forget_parent_locks_after_fork
from ._redlock_fanout import fan_out_one, remember
from ._redlock_links import Links
from ._redlock_masters import open_masters
from ._redlock_result import (
    InstanceSummary,
    RedlockLease,
    RedlockManyResult,
    RedlockResult,
    RedlockStatus,
    decide,
    drift_ms,
)
from ._redlock_scripts import EXTEND, EXTENDED, LOST, UNDECIDED, extend_verdict, extended
from ._single_plan import extend_ms
from ._validate import Seconds, check_token, encode_name, positive_seconds, timeout_seconds, ttl_ms
from .client import DEFAULT_CHUNK_SIZE, TOKEN_BYTES, LockClient
from .errors import (
    ExtensionLimitError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockError,
    QuorumError,
    ReplyError,
)
from .lease import FREE, LockInfo, commands_ran, commands_sent, commands_unknown, info_from_pttl
from .renewal import AutoRenew, OnLost, check_policy

if TYPE_CHECKING:
    from ._redlock_lock import RedlockLock
    from ._redlock_renewal import RedlockRenewer

log = logging.getLogger("turbolock.redlock")

DEFAULT_NODE_TIMEOUT = 0.05
"""Longest wait for one master's reply, unless a tenth of the ttl is shorter."""
MAX_CHUNK_TIMEOUT = 1.0
"""Longest wait for one master's replies to a bulk chunk (or a renewal round)."""
DEFAULT_RETRY_COUNT = 3
DEFAULT_RETRY_DELAY = 0.2
DEFAULT_DRIFT_FACTOR = 0.01
CLEANUP_GRACE = 1.0
"""Seconds past a lock's ttl during which a maybe-held key is still worth releasing."""

def _count_int(value: object, argument: str, allow_none: bool) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentTypeError(argument, "must be an int" + (" or None" if allow_none else ""))
    if value < 0:
        raise InvalidArgumentError(argument, "must not be negative")
    return value


def _master_errors(clients: Sequence[LockClient], replies: Sequence[object],
                   errors: Sequence[str | None]) -> tuple[str, ...]:
    out = []
    for client, reply, error in zip(clients, replies, errors, strict=True):
        if error is not None:
            out.append(error)
        elif type(reply) is ReplyError:
            out.append(f"{client.options.address} answered {reply.code}")
    return tuple(out)


class RedlockClient:
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

    def __init__(self, masters: Sequence[str | LockClient], *, node_timeout: Seconds | None = None,
                 retry_count: int | None = None, retry_delay: Seconds = DEFAULT_RETRY_DELAY,
                 drift_factor: float = DEFAULT_DRIFT_FACTOR, key_prefix: str | bytes | None = None,
                 core: str | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE, **connection: Any) -> None:
        self.node_timeout = None if node_timeout is None else positive_seconds(node_timeout, "node_timeout")
        self.retry_count = _count_int(retry_count, "retry_count", allow_none=True)
        delay = timeout_seconds(retry_delay, "retry_delay")
        if delay is None:
            raise InvalidArgumentError("retry_delay", "must be a finite number of seconds")
        self.retry_delay = delay
        if isinstance(drift_factor, bool) or not isinstance(drift_factor, int | float):
            raise InvalidArgumentTypeError("drift_factor", "must be a float")
        if not 0.0 <= drift_factor < 0.5:
            raise InvalidArgumentError("drift_factor", "must be at least 0 and below 0.5")
        self.drift_factor = float(drift_factor)
        self._chunk_size = bulk.check_chunk_size(chunk_size)
        chosen_core = _core.get_core(core) if core is not None else None
        clients, opened, prefix = open_masters(masters, key_prefix, core, self._chunk_size, connection)
        self.masters: tuple[LockClient, ...] = tuple(clients)
        self._links = Links(clients)
        self._opened = opened
        self.key_prefix = prefix
        self.quorum = len(clients) // 2 + 1
        self.core: ModuleType = chosen_core if chosen_core is not None else clients[0].core
        self._owner = Owner()
        self._ttls: dict[object, tuple[int, float, float]] = {}
        self._renewer_instance: RedlockRenewer | None = None
        self._renewer_lock = threading.Lock()
        self._closed = False
        forget_parent_locks_after_fork(self)

    def _forget_parent_locks(self) -> None:
        self._owner = Owner()
        self._renewer_lock = threading.Lock()
        if self._renewer_instance is not None:
            self._renewer_instance.forget_after_fork()

    @property
    def implementation(self) -> str:
        """The core the client encodes and parses with: "c" or "py"."""
        return str(self.core.IMPLEMENTATION)

    @property
    def chunk_size(self) -> int:
        return self._chunk_size

    # -- checks ---------------------------------------------------------------------------------

    def node_timeout_for(self, ms: int) -> float:
        """The per-node timeout used for locks of ``ms`` milliseconds."""
        if self.node_timeout is not None:
            return self.node_timeout
        return min(DEFAULT_NODE_TIMEOUT, ms / 10_000.0)

    def chunk_timeout_for(self, ms: int) -> float:
        """The per-node timeout of one bulk chunk or renewal round, for locks of ``ms`` milliseconds.

        Longer than a single command's: a loaded server takes a while over a thousand commands,
        and a master timed out mid-batch misses the rest of it. Still a tenth of the ttl at most
        (unless ``node_timeout`` is longer), so a stuck master cannot eat the validity.
        """
        return max(self.node_timeout_for(ms), min(MAX_CHUNK_TIMEOUT, ms / 10_000.0))

    def _ttl(self, ttl: object, argument: str = "ttl") -> tuple[int, float, float]:
        """(ttl in ms, its drift allowance in ms, its per-node timeout), refusing a ttl that would
        leave no validity even when every master answers at its last moment."""
        if type(ttl) is int or type(ttl) is float:  # most callers use a handful of ttls
            known = self._ttls.get(ttl)
            if known is not None:
                return known
        ms = ttl_ms(ttl, argument)
        drift = drift_ms(ms, self.drift_factor)
        node_timeout = self.node_timeout_for(ms)
        if ms - drift - node_timeout * 1000.0 <= 0:
            hint = " or a shorter node_timeout" if self.node_timeout is not None else ""
            raise InvalidArgumentError(
                argument, f"{ms} ms leaves no validity once the clock drift allowance ({drift:g} ms) and "
                          f"the per-node timeout ({node_timeout * 1000:g} ms) are taken off; use a longer "
                          f"ttl{hint}")
        if type(ttl) is int or type(ttl) is float:
            if len(self._ttls) >= 64:
                self._ttls.clear()
            self._ttls[ttl] = (ms, drift, node_timeout)
        return ms, drift, node_timeout

    def _renew_policy(self, auto_renew: bool | AutoRenew, on_lost: OnLost | None, ms: int,
                      node_timeout: float) -> AutoRenew | None:
        if auto_renew is False:
            if on_lost is not None:
                raise InvalidArgumentError("on_lost", "needs auto_renew (only renewed locks are watched)")
            return None
        if on_lost is not None and not callable(on_lost):
            raise InvalidArgumentTypeError("on_lost", "must be callable")
        return check_policy(auto_renew, ms)

    @staticmethod
    def _extension_limit(max_extensions: object) -> int | None:
        return _count_int(max_extensions, "max_extensions", allow_none=True)

    def _check_lease(self, lease: object, argument: str = "lease") -> RedlockLease:
        check_lease(lease, self._owner, RedlockLease, argument)
        assert isinstance(lease, RedlockLease)
        return lease

    # -- acquire --------------------------------------------------------------------------------

    def acquire(self, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                timeout: Seconds | None = None, token: bytes | None = None,
                auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                max_extensions: int | None = None) -> RedlockResult:
        """Take ``name`` on a majority of the masters; the result says how it went.

        Retries (``blocking=True``) after a random delay until ``timeout`` seconds have passed
        (None: until the lock is taken, as every Lock waits; 0 or ``blocking=False``: one
        attempt), and at most ``retry_count`` times if the client has one. ``max_extensions``
        limits how often the lease may be extended, by hand or by auto-renewal. Never raises for
        what the masters said: read ``result.status``.
        """
        key = encode_name(name)
        ms, drift, node_timeout = self._ttl(ttl)
        wait = check_wait(blocking, timeout)
        if token is not None:
            check_token(token)
        limit = _count_int(max_extensions, "max_extensions", allow_none=True)
        policy = self._renew_policy(auto_renew, on_lost, ms, node_timeout)
        deadline = None if wait is None else time.monotonic() + wait
        attempts = 0
        while True:
            attempts += 1
            result = self._attempt(name, key, secrets.token_bytes(TOKEN_BYTES) if token is None else token,
                                   ms, drift, node_timeout, attempts, limit)
            lease = result.lease
            if lease is not None:
                if policy is not None:
                    self._renewer().add((lease,), policy, on_lost)
                return result
            if wait == 0.0 or (self.retry_count is not None and attempts > self.retry_count):
                return result
            delay = random.uniform(0.0, self.retry_delay)
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return result
                delay = min(delay, remaining)
            time.sleep(delay)

    def try_acquire(self, name: str | bytes, ttl: Seconds, *, token: bytes | None = None,
                    auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                    max_extensions: int | None = None) -> RedlockLease | None:
        """One attempt: a ``RedlockLease``, or None when others hold the lock on too many masters
        (Conflicted) or the attempt used up its validity (Expired).

        ``QuorumError`` (with ``.result``) when too many masters failed to answer to decide
        (NoQuorum); what was taken is released again first.
        """
        result = self.acquire(name, ttl, blocking=False, token=token, auto_renew=auto_renew, on_lost=on_lost,
                              max_extensions=max_extensions)
        if result.status is RedlockStatus.NO_QUORUM:
            raise QuorumError(f"could not reach a quorum for {result.describe()}", [name], result)
        return result.lease

    def _attempt(self, name: str | bytes, key: bytes, token: bytes, ms: int, drift: float,
                 node_timeout: float, attempts: int, max_extensions: int | None) -> RedlockResult:
        def encode(buf: Any) -> None:
            buf.append_set_nx_px(key, token, ms)

        started = time.monotonic()
        replies, failures = fan_out_one(self._links, encode, node_timeout)
        valid = started + (ms - drift) / 1000.0 > time.monotonic()
        acquired = conflicted = errored = 0
        maybe_held: list[int] = []
        for m, reply in enumerate(replies):
            if reply == b"OK":
                acquired += 1
                maybe_held.append(m)
            elif reply is None:
                conflicted += 1
            else:
                errored += 1
                if reply is UNKNOWN:
                    maybe_held.append(m)
        summary = InstanceSummary(acquired, conflicted, errored)
        status = decide(summary, self.quorum, valid)
        errors = _master_errors(self.masters, replies, failures) if errored else ()
        if status is RedlockStatus.ACQUIRED:
            lease = RedlockLease(name, key, token, ms, started, self._owner, drift, summary, max_extensions)
            return RedlockResult(name, status, summary, attempts, lease, self.quorum, errors)
        if maybe_held:
            self._release_keys(maybe_held, key, token, started + ms / 1000.0 + CLEANUP_GRACE, node_timeout)
        return RedlockResult(name, status, summary, attempts, None, self.quorum, errors)

    def _release_keys(self, only: Sequence[int] | None, key: bytes, token: bytes, expires_at: float,
                      node_timeout: float) -> list[object]:
        """Compare-and-delete ``key`` on every master (or those in ``only``); where no answer
        came, again when the master answers (see ``_redlock_fanout``)."""
        sha = _scripts.RELEASE.sha

        def encode(buf: Any) -> None:
            buf.append_evalsha(sha, key, token, None)

        replies, _ = fan_out_one(self._links, encode, node_timeout, _scripts.RELEASE, only)
        for m in range(len(replies)) if only is None else only:
            if type(replies[m]) is not int:
                remember(self.masters[m], [key], [token], expires_at)
        return replies if only is None else [replies[m] for m in only]

    def query(self, name: str | bytes) -> LockInfo:
        """Whether a quorum of masters holds ``name``, and for how long at least a quorum still
        will (never whose it is). ``QuorumError`` when too few masters answer to tell."""
        key = encode_name(name)

        def encode(buf: Any) -> None:
            buf.append_pttl(key)

        replies, _ = fan_out_one(self._links, encode, self.node_timeout or DEFAULT_NODE_TIMEOUT)
        answered = [reply for reply in replies if type(reply) is int]
        if len(answered) < self.quorum:
            raise QuorumError(
                f"only {len(answered)} of {len(replies)} masters answered the query for {name!r}", [name])
        # A lock stands while a quorum still has its key: the quorum-th longest remaining ttl.
        held = sorted((math.inf if ms == -1 else ms for ms in answered if ms >= 0 or ms == -1), reverse=True)
        if len(held) < self.quorum:
            return FREE
        standing = held[self.quorum - 1]
        return info_from_pttl(-1 if standing == math.inf else int(standing))

    def check(self, lease: RedlockLease) -> float | None:
        """Seconds a majority of masters still holds the lock for ``lease`` (the quorum-th longest
        remaining ttl among the masters where it is ours), None when fewer than a majority do.
        ``QuorumError`` when too few masters answer to tell."""
        lease = self._check_lease(lease)
        key, token, sha = lease.key, lease.token, _scripts.CHECK.sha

        def encode(buf: Any) -> None:
            buf.append_evalsha(sha, key, token, None)

        replies, _ = fan_out_one(self._links, encode, self.node_timeout_for(lease.ttl_ms), _scripts.CHECK)
        answered = [reply for reply in replies if type(reply) is int]
        if len(answered) < self.quorum:
            raise QuorumError(
                f"only {len(answered)} of {len(replies)} masters answered the check of {lease.name!r}",
                [lease.name])
        ours = sorted((math.inf if ms == -1 else ms for ms in answered if ms >= 0 or ms == -1), reverse=True)
        if len(ours) < self.quorum:
            return None
        standing = ours[self.quorum - 1]
        return math.inf if standing == math.inf else standing / 1000.0

    # -- release and extend ---------------------------------------------------------------------

    def release(self, lease: RedlockLease) -> bool:
        """Delete the lock on every master where it is still ours. True when that was a majority;
        False when it was no longer ours on enough of them (expired, or taken since).

        ``QuorumError`` when too many masters failed to answer to tell; the release is retried
        on them when they answer again.
        """
        lease = self._check_lease(lease)
        if lease.renewal is not None:
            self._renewer().remove((lease,))
        lease._released = True
        forget_at = time.monotonic() + lease.ttl_ms / 1000.0 + CLEANUP_GRACE
        replies = self._release_keys(None, lease.key, lease.token, forget_at,
                                     self.node_timeout_for(lease.ttl_ms))
        released = errored = 0
        for reply in replies:
            if type(reply) is not int:
                errored += 1
            elif reply == 1:
                released += 1
        if released >= self.quorum:
            return True
        if released + errored >= self.quorum:
            summary = InstanceSummary(released, len(replies) - released - errored, errored)
            raise QuorumError(
                f"release of lock {lease.name!r} is unconfirmed: released on {released}, not ours on "
                f"{summary.conflicted}, no answer from {errored} of {len(replies)} masters (quorum "
                f"{self.quorum}); it is retried on those when they answer", [lease.name])
        return False

    def extend(self, lease: RedlockLease, ttl: Seconds, *, additive: bool = False) -> bool:
        """Set the lock's ttl to ``ttl`` from now on every master where it is ours (and again where
        a master lost it). True with a majority and validity left; False when it is no longer
        ours on enough masters or when its validity had already ended (nothing is sent then).

        ``ExtensionLimitError`` past ``max_extensions``; ``QuorumError`` when too many masters
        failed to answer to tell. ``additive=True`` adds ``ttl`` to the validity left instead.
        """
        lease = self._check_lease(lease)
        ms, drift, node_timeout = self._ttl(extend_ms(lease, ttl, additive) / 1000.0)
        if lease._released:
            return False
        if lease.max_extensions is not None and lease.extensions >= lease.max_extensions:
            raise ExtensionLimitError(
                f"lock {lease.name!r} was already extended {lease.extensions} times, its max_extensions",
                names=[lease.name])
        if lease.valid_for() <= 0:
            return False
        ok, verdict, summary = self._extend_one(lease, ms, drift, node_timeout)
        if ok:
            if lease.renewal is not None:
                self._renewer().rescheduled(lease)
            return True
        if verdict == UNDECIDED:
            raise QuorumError(
                f"extend of lock {lease.name!r} is unconfirmed: extended on {summary.acquired}, no answer "
                f"from {summary.errored} of {sum(summary)} masters (quorum {self.quorum})", [lease.name])
        return False

    def _extend_one(self, lease: RedlockLease, ms: int, drift: float,
                    node_timeout: float) -> tuple[bool, str, InstanceSummary]:
        sha = EXTEND.sha
        key, token = lease.key, lease.token

        def encode(buf: Any) -> None:
            buf.append_evalsha(sha, key, token, ms)

        started = time.monotonic()
        commands_sent((lease,), started, started + (ms - drift) / 1000.0)
        try:
            replies, _ = fan_out_one(self._links, encode, node_timeout, EXTEND)
        except BaseException:
            commands_unknown((lease,), started)
            raise
        done = sum(1 for reply in replies if extended(reply))
        held = sum(1 for reply in replies if reply == 1)
        theirs = sum(1 for reply in replies if reply == 0)
        summary = InstanceSummary(done, theirs, len(replies) - done - theirs)
        verdict = extend_verdict(held, summary.errored, self.quorum)
        if verdict == EXTENDED and started + (ms - drift) / 1000.0 > time.monotonic():
            lease.drift_ms = drift
            commands_ran((lease,), started, ms)
            lease.extensions += 1
            lease.instances = summary
            return True, verdict, summary
        commands_unknown((lease,), started)  # extended on some masters, perhaps: validity can only shrink
        if verdict == LOST:
            self._lease_lost(lease, f"an extend found it no longer held on a majority ({summary})")
            if done:  # keys it set again or extended on a minority: released in the background
                self._abandoned(key, token, time.monotonic() + ms / 1000.0 + CLEANUP_GRACE)
        return False, verdict, summary

    def _abandoned(self, key: bytes, token: bytes, forget_at: float) -> None:
        """A renewed lease the program dropped: released on every master in the background."""
        for master in self.masters:
            remember(master, [key], [token], forget_at)

    def _lease_lost(self, lease: RedlockLease, reason: str) -> None:
        renewer = self._renewer_instance
        if lease.renewal is not None and renewer is not None:
            renewer._lost(lease, reason)
        else:
            lease.mark_lost(reason)

    def lease(self, name: str | bytes, token: bytes) -> RedlockLease:
        """A lease for a Redlock taken elsewhere with ``token``, to extend or release it here.
        Nothing is sent: it has no validity until ``extend`` succeeds."""
        key = encode_name(name)
        return RedlockLease(name, key, check_token(token), 0, time.monotonic(), self._owner, 0.0,
                            InstanceSummary(0, 0, 0), None)

    # -- object API -----------------------------------------------------------------------------

    def lock(self, name: str | bytes, ttl: Seconds | None = None, *, blocking: bool = True,
             timeout: Seconds | None = None, token: bytes | None = None,
             auto_renew: bool | AutoRenew | None = None, on_lost: OnLost | None = None,
             max_extensions: int | None = None) -> RedlockLock:
        """A ``RedlockLock`` for ``name``: ``with`` block, decorator, or explicit acquire()/release().
        With no ``ttl``: 30 s renewed until released, as for every Lock."""
        from ._redlock_lock import RedlockLock

        ttl, renew = lock_ttl(ttl, auto_renew)
        return RedlockLock(self, name, ttl, blocking=blocking, timeout=timeout, token=token,
                           auto_renew=renew, on_lost=on_lost, max_extensions=max_extensions)

    # -- bulk -----------------------------------------------------------------------------------

    def acquire_many(self, names: Sequence[str | bytes], ttl: Seconds, *, all_or_nothing: bool = False,
                     tokens: Sequence[bytes] | None = None, auto_renew: bool | AutoRenew = False,
                     on_lost: OnLost | None = None, max_extensions: int | None = None,
                     limit: int | None = None) -> RedlockManyResult:
        """One attempt per name, pipelined to every master at once, the quorum decided per name;
        a result per name in input order. Names not acquired are released on every master.
        Never raises for what the masters said: see ``result.statuses``.
        ``limit=k`` takes at most k *free* names instead, from a random point of the list, in chunks
        of at most the names still wanted (for workers claiming shards); see ``result.not_tried``."""
        ms, drift, node_timeout = self._ttl(ttl)
        max_ext = _count_int(max_extensions, "max_extensions", allow_none=True)
        policy = self._renew_policy(auto_renew, on_lost, ms, node_timeout)
        if limit is None:
            result = _redlock_bulk.acquire_many(self, names, ms, drift, all_or_nothing, tokens, max_ext)
        else:
            from . import _redlock_claim

            result = _redlock_claim.claim_many(self, names, ms, drift, limit, all_or_nothing, tokens, max_ext)
        if policy is not None:
            self._renewer().add(result.acquired, policy, on_lost)
        return result

    def release_many(self, leases: Sequence[RedlockLease]) -> list[bool]:
        """``release`` for every lease, pipelined; True/False per lease in input order.
        ``QuorumError`` (after all were tried) lists the leases no majority answered for."""
        return _redlock_bulk.release_many(self, leases)

    def extend_many(self, leases: Sequence[RedlockLease], ttl: Seconds) -> list[bool]:
        """``extend`` for every lease, pipelined; True/False per lease in input order."""
        return _redlock_bulk.extend_many(self, leases, ttl)

    # -- renewal and lifetime -------------------------------------------------------------------

    def _renewer(self) -> RedlockRenewer:
        with self._renewer_lock:
            if self._renewer_instance is None:
                from ._redlock_renewal import RedlockRenewer

                self._renewer_instance = RedlockRenewer(self)
            return self._renewer_instance

    @property
    def renewing(self) -> int:
        """How many locks the renewer currently keeps."""
        renewer = self._renewer_instance
        return 0 if renewer is None else len(renewer)

    def close(self) -> None:
        """Stop renewing and release every auto-renewed lock, make one try at the maybe-held
        releases still pending, then close the masters opened from URLs."""
        if self._closed:
            return
        self._closed = True
        renewer = self._renewer_instance
        if renewer is not None:
            renewer.stop()
            held = renewer.held_leases()
            if held:
                try:
                    self.release_many(held)  # type: ignore[arg-type]
                except LockError as exc:
                    log.warning("turbolock: close could not release %d renewed Redlocks: %s", len(held), exc)
        pending = [m for m, client in enumerate(self.masters) if client._cleanup]
        if pending:
            def ping(buf: Any) -> None:
                buf.append_command((b"PING",))

            fan_out_one(self._links, ping, self.node_timeout or DEFAULT_NODE_TIMEOUT, None, pending)
        self._links.close()
        for client in self._opened:  # a master still down: its maybe-held keys expire by their ttl
            client._cleanup.clear()
            client._close(time.monotonic())

    def __enter__(self) -> RedlockClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        addresses = ", ".join(client.options.address for client in self.masters)
        return (f"RedlockClient([{addresses}], quorum={self.quorum}, key_prefix={self.key_prefix!r}, "
                f"core={self.implementation!r})")


__all__ = ["InstanceSummary", "RedlockClient", "RedlockLease", "RedlockManyResult", "RedlockResult",
           "RedlockStatus"]
