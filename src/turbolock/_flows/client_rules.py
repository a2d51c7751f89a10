"""What every single-server client (threads or asyncio) holds and does without I/O: its
settings, leases and their ownership, the Lock objects it makes, and what happens to a lock
whose outcome was lost or that was found lost. The clients add the connections and a driver.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any, Generic, TypeVar

from turbolock._flows.bulk_flows import claim_many_flow
from turbolock._flows.bulk_plan import release_orphan
from turbolock._flows.claim import ClaimResult
from turbolock._flows.cleanup_book import CleanupBook
from turbolock._flows.client_settings import (
    CLIENT_KEYWORDS,
    CodecAndChunks,
    acquire_lost_error,
    check_chunk_size,
    check_max_connections,
    not_durable_error,
    renew_policy,
    split_keywords,
)
from turbolock._flows.closing import Closable
from turbolock._flows.fair import Leaving
from turbolock._flows.lock_rules import lock_ttl
from turbolock._flows.ownership import Owner, check_lease
from turbolock._flows.renewal_book import AutoRenew, OnLost
from turbolock._flows.renewer_slot import RenewerSlot
from turbolock._flows.single import adopted_lease, check_flow, extend_flow, query_flow
from turbolock._flows.steps import Flow
from turbolock._wire import core as _core
from turbolock._wire import scripts as _scripts
from turbolock._wire.fair_scripts import FAIR_ACQUIRE
from turbolock._wire.replies import reply_error
from turbolock._wire.validate import Seconds, check_key_prefix, encode_name
from turbolock.errors import ClientClosedError, LockError
from turbolock.lease import FencedLease, Lease
from turbolock.options import ConnectionOptions, options_from_keywords, options_from_redis, options_from_url

FAIR_WAITERS_GRACE = 1.0
"""The longest close waits for woken fair waiters to leave their queues (an attempt in flight)."""
YIELD_SECONDS = 0.002
"""How long a client that released a lock others wait for lets them take it first."""

YIELDING_KEYS = 1024
"""Keys released to waiters elsewhere remembered at once before the expired ones are dropped."""

C = TypeVar("C", bound="ClientRules[Any]")
LockT = TypeVar("LockT")


class ClientRules(Closable, CodecAndChunks, RenewerSlot, Generic[LockT]):
    """Settings and bookkeeping of a single-server client; ``_lock_type`` is its Lock object."""

    _lock_type: Any
    """The class of its Lock objects (made by ``lock()``)."""
    _own_keywords: tuple[str, ...] = CLIENT_KEYWORDS
    """Keywords ``from_url`` and ``from_redis`` pass to the client, not to its connections."""
    _waker_instance: Any = None
    _batches_keys = True
    """Whether a script call may take many keys (``_many_batched``): one server or Sentinel's
    master; not a cluster, whose keys live on many nodes."""
    _fenced_acquire = _scripts.FENCED_ACQUIRE
    """The script of a fenced acquire: on one server, every name's fence from one counter."""
    _fair_acquire = FAIR_ACQUIRE
    """A fair attempt's scripts (``fair_scripts.FAIR_ACQUIRE``)."""
    _wakes_waiters = False
    """Whether blocking acquires are woken by releases (``_flows.wake_book``): the
    ``wake_waiters`` option of a one-server or Sentinel client. A cluster's waiters only poll,
    for now: its subscribers would have to follow each key's shard."""

    def _configure(self, host: str, port: int, key_prefix: str | bytes, max_connections: int,
                   chunk_size: int, core: str | None, connection: dict[str, Any]) -> None:
        options = connection.pop("options", None)
        if options is None:
            options = options_from_keywords(host=host, port=port, **connection)
        check_max_connections(max_connections)
        self._chunk_size = check_chunk_size(chunk_size)
        self.options: ConnectionOptions = options
        self.key_prefix = check_key_prefix(key_prefix)
        self.core: ModuleType = _core.get_core(core)
        self._owner = Owner()
        self._cleanup = CleanupBook()
        self._renewer_instance = None
        self._closed = False
        self._yield_until: dict[bytes, float] = {}
        self._fair_waiting: dict[bytes, tuple[bytes, float]] = {}
        """Fair waiters in a queue now: waiter -> (the name as a key, how long its place may last)."""
        self._fair_left: set[bytes] = set()
        """Fair waiters close made leave their queues: a lock one of them takes is not theirs."""
        self._fair_lock = threading.Lock()

    def _forget_parent_bookkeeping(self) -> None:
        """In a forked child: the parent's leases, cleanups and fair waiters are the parent's
        (a child's close must not make a parent's waiter leave its queue: that leave deletes the
        lock its waiter took meanwhile)."""
        self._owner = Owner()
        self._closing = self._closed  # a close under way in the parent is the parent's (its waits end there)
        self._cleanup.forget_after_fork()
        self._fair_waiting = {}
        self._fair_left = set()
        self._fair_lock = threading.Lock()

    def _leave_fair_queues(self) -> None:
        """At close, before the last cleanup: every fair waiter still queued leaves its queue
        (its own leave comes once close has woken it, too late for that cleanup; its place would
        hold up the waiters behind it for the server's patience)."""
        now = time.monotonic()
        with self._fair_lock:
            for waiter, (key, seconds) in list(self._fair_waiting.items()):
                self._fair_left.add(waiter)
                self._cleanup.remember(key, Leaving(waiter), now + seconds)

    def _fair_won(self, waiter: bytes) -> bool:
        """A queued fair waiter's attempt took the lock: whether the waiter keeps it. Not when
        close made it leave its queue meanwhile: that leave deletes the lock its waiter holds
        (or ran first, and the lock expires by its ttl). One or the other, under the lock."""
        with self._fair_lock:
            if waiter in self._fair_left:
                return False
            self._fair_waiting.pop(waiter, None)
            return True

    # -- fairness between waiters (see ``_flows.wake_book``) ---------------------------------------

    def _released(self, key: bytes, reply: int) -> None:
        """After a release of ``key`` whose reply (1 + the subscribers told) says clients other
        than this one wait for it: this client's next blocking acquire of it, within
        ``YIELD_SECONDS``, lets one of them take it first. A worker that releases and takes the
        lock again at once would otherwise keep it from waiters who need a round trip to hear."""
        told = reply - 1
        if told <= 0 or not self._wakes_waiters:
            return
        key = self.key_prefix + key  # the channel: the key as the server has it
        waker = self._waker_instance
        if waker is not None and waker.listening(key):
            told -= 1  # this client's own subscriber heard it too
        if told > 0:
            now = time.monotonic()
            yielding = self._yield_until
            if len(yielding) >= YIELDING_KEYS:
                # list() copies at once: another thread of a threaded client may add meanwhile.
                for stale in [k for k, until in list(yielding.items()) if until <= now]:
                    yielding.pop(stale, None)
            yielding[key] = now + YIELD_SECONDS

    def _wait_first(self, name: str | bytes) -> tuple[bytes, float | None] | None:
        """Whether a blocking acquire of ``name`` waits to be woken before its first attempt:
        its key and for how long at most (None: a waiter's usual pause), while waiters of this
        client queue for it (first come, first served: one release wakes one), or just after
        this client released it to waiters elsewhere; None to attempt at once."""
        waker = self._waker_instance
        if not self._yield_until and (waker is None or not waker.waiting()):
            return None
        key = self.key_prefix + encode_name(name)
        if waker is not None and waker.queued(key):
            return key, None
        until = self._yield_until.pop(key, None)
        left = 0.0 if until is None else until - time.monotonic()
        return (key, left) if left > 0 else None

    @classmethod
    def from_url(cls: type[C], url: str, **kwargs: Any) -> C:
        """``redis://[user:password@]host:port/db``, ``rediss://...`` (TLS) or ``unix:///path?db=N``."""
        client_kwargs = split_keywords(kwargs, cls._own_keywords)
        make: Any = cls
        client: C = make(options=options_from_url(url, **kwargs), **client_kwargs)
        return client

    @classmethod
    def from_redis(cls: type[C], redis_client: Any, **kwargs: Any) -> C:
        """Connect where a ``redis.Redis`` (or ``redis.asyncio.Redis``) connects, with its
        credentials, db, TLS and timeouts."""
        client_kwargs = split_keywords(kwargs, cls._own_keywords)
        make: Any = cls
        client: C = make(options=options_from_redis(redis_client, **kwargs), **client_kwargs)
        return client

    def _renew_policy(self, auto_renew: bool | AutoRenew, on_lost: OnLost | None,
                      ms: int) -> AutoRenew | None:
        if auto_renew is False and on_lost is None:  # most acquires: nothing to check
            return None
        return renew_policy(auto_renew, on_lost, ms)

    def _claim_many_flow(self, names: Sequence[str | bytes], ttl: Seconds, limit: int,
                         tokens: Sequence[bytes] | None, fenced: bool = False) -> Flow[ClaimResult]:
        """A claim (``acquire_many(..., limit=k)``) on this client's topology."""
        return claim_many_flow(self, names, ttl, limit, tokens, fenced)

    def _refused(self, reply: object, name: str | bytes) -> LockError:
        """The error for an acquire's error reply (a Sentinel client also drops its master on
        READONLY)."""
        return reply_error(reply, name)

    def lease(self, name: str | bytes, token: bytes) -> Lease:
        """A lease for a lock taken elsewhere (another process, another object) with ``token``,
        to extend, check or release it here. Nothing is sent: it believes in no time left
        (``valid_for() == 0``) until ``extend`` or ``check`` says more."""
        return adopted_lease(name, token, self._owner)

    def lock(self, name: str | bytes, ttl: Seconds | None = None, *, blocking: bool = True,
             timeout: Seconds | None = None, token: bytes | None = None,
             auto_renew: bool | AutoRenew | None = None, on_lost: OnLost | None = None,
             fenced: bool = False, fair: bool = False) -> LockT:
        """A Lock object for ``name``: use it with ``with`` (``async with``), as a decorator, or
        call acquire().

        With no ``ttl`` the lock lives 30 s at a time and is renewed until released (unless
        ``auto_renew=False``). ``timeout=None`` waits until the lock is free; ``timeout=0`` or
        ``blocking=False`` makes one attempt. ``fenced=True``: each acquire gets a fence
        (``lock.fence``, see ``try_acquire``). ``fair=True``: waiters take the lock strictly in
        the order they first asked, among the fair Lock objects of this name (a try with
        ``blocking=False`` succeeds only when nobody waits).
        """
        ttl, renew = lock_ttl(ttl, auto_renew)
        lock: LockT = self._lock_type(self, name, ttl, blocking=blocking, timeout=timeout, token=token,
                                      auto_renew=renew, on_lost=on_lost, fenced=fenced, fair=fair)
        return lock

    # The flows of one lock, for the Lock objects to run in their own driver (functions of the
    # client: bound here, they take it as their first argument).
    _extend_flow = extend_flow
    _check_flow = check_flow
    _query_flow = query_flow

    def _check_lease(self, lease: object, argument: str = "lease") -> None:
        check_lease(lease, self._owner, Lease, argument, FencedLease)

    def _remember_cleanup(self, key: bytes, token: bytes, forget_at: float, recheck: bool = False) -> None:
        raise NotImplementedError

    def _on_orphan(self, tag: Any, reply: object) -> None:
        """A bulk acquire's chunk whose caller is gone (cancelled, interrupted): what it took,
        or may have taken, is released in the background."""
        release_orphan(self._remember_cleanup, tag, reply)

    def _acquire_lost(self, attempts: Iterable[tuple[str | bytes, bytes, bytes, float]],
                      cause: BaseException, own_tokens: bool = False) -> BaseException:
        """Maybe-held locks (name, key, token, forget_at) are released in the background; the error.
        ``own_tokens``: tokens this client made, released again when found free (``recheck``)."""
        attempts = list(attempts)
        for _, key, token, forget_at in attempts:
            self._remember_cleanup(key, token, forget_at, own_tokens)
        if not isinstance(cause, Exception):
            return cause
        if self._closed:  # closed during the call: no background release will come
            cause = ClientClosedError()
        return acquire_lost_error([name for name, _, _, _ in attempts], cause)

    def _not_durable(self, locks: Iterable[tuple[str | bytes, bytes, bytes, float]]) -> LockError:
        """Locks (name, key, token, forget_at) too few replicas acknowledged: released in the
        background (see ``replicas_ack``); the error."""
        locks = list(locks)
        for _, key, token, forget_at in locks:
            self._remember_cleanup(key, token, forget_at)
        return not_durable_error([name for name, _, _, _ in locks], self.options.replicas_ack)

    @property
    def pending_cleanup(self) -> int:
        """Locks whose acquire or release outcome was lost (or whose acquiring task was
        cancelled) and that still await a release in the background, those being released right
        now included; each at most until its ttl has passed. Not counted: a lock already found
        free that is released once more in case its lost acquire still runs (``CleanupBook``)."""
        return len(self._cleanup)

    def _lease_lost(self, lease: Lease, reason: str) -> None:
        """The server said the lock is not ours any more: signal it (renewed leases through the
        renewer, so ``on_lost`` runs)."""
        renewer = self._renewer_instance
        if lease.renewal is not None and renewer is not None:
            renewer._lost(lease, reason)
        else:
            lease.mark_lost(reason)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.options.address}, db={self.options.db}, "
                f"key_prefix={self.key_prefix!r}, core={self.implementation!r})")
