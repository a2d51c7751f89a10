"""``LockClient``: single locks (try_acquire, release, extend, query) and the bulk API on one server."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Iterable, Sequence
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

from . import _core, _scripts, bulk, bulk_claim
from ._claim import check_claim
from ._cleaner import BackgroundCleaner
from ._cleanup_book import CleanupBook
from ._executor import Executor, Unconfirmed
from ._lock_rules import lock_ttl
from ._ownership import Owner, check_lease, forget_parent_locks_after_fork
from ._pool import ConnectionPool
from ._replies import reply_error
from ._single_plan import (
    adopted_lease,
    check_result,
    extend_ms,
    extend_result,
    extend_unconfirmed,
    query_result,
    release_result,
    release_unconfirmed,
)
from ._validate import Seconds, check_key_prefix, check_token, encode_name, ttl_ms
from .errors import (
    AcquireOutcomeUnknownError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockError,
)
from .lease import Lease, LockInfo, commands_refused, commands_sent, commands_unknown
from .options import ConnectionOptions, options_from_keywords, options_from_redis, options_from_url
from .renewal import COMMANDS_PER_WRITE, AutoRenew, OnLost, Renewer, check_policy

if TYPE_CHECKING:
    from .lock import Lock

log = logging.getLogger("turbolock")

TOKEN_BYTES = 16
DEFAULT_KEY_PREFIX = "turbolock:"
DEFAULT_MAX_CONNECTIONS = 32
DEFAULT_CHUNK_SIZE = 1000
MAX_CHUNK_SIZE = 10_000

_CLIENT_KEYWORDS = ("key_prefix", "max_connections", "chunk_size", "core")

class LockClient:
    """A lock client for one Redis server; thread-safe, with a pool of connections.

    ``timeout`` bounds every call (a bulk call gets it per chunk); ``connect_timeout`` bounds
    opening a connection. Every lock key is ``key_prefix + name``. ``core`` picks the codec:
    "c", "py", or None for the compiled one when it is installed.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, *,
                 key_prefix: str | bytes = DEFAULT_KEY_PREFIX, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, core: str | None = None, **connection: Any) -> None:
        options = connection.pop("options", None)
        if options is None:
            options = options_from_keywords(host=host, port=port, **connection)
        self._setup(options, key_prefix, max_connections, chunk_size, core)

    def _setup(self, options: ConnectionOptions, key_prefix: str | bytes, max_connections: int,
               chunk_size: int, core: str | None) -> None:
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise InvalidArgumentError("max_connections", "must be a positive int")
        self._chunk_size = bulk.check_chunk_size(chunk_size)
        self.options = options
        self.key_prefix = check_key_prefix(key_prefix)
        self.core: ModuleType = _core.get_core(core)
        self._pool = ConnectionPool(options, self.core, self.key_prefix, max_connections)
        self._exec = Executor(self._pool, options.timeout, self._chunk_size)
        self._exec_renewals = Executor(self._pool, options.timeout, COMMANDS_PER_WRITE)
        self._owner = Owner()
        self._cleanup = CleanupBook()
        self._cleaner = BackgroundCleaner(self._cleanup, self._release_keys, options.timeout)
        self._renewer_instance: Renewer | None = None
        self._renewer_lock = threading.Lock()
        self._closed = False
        forget_parent_locks_after_fork(self)

    def _forget_parent_locks(self) -> None:
        # In a forked child: the parent's leases, renewals and cleanups are the parent's business.
        self._owner = Owner()
        self._cleanup.clear()
        self._cleaner.forget_after_fork()
        self._renewer_lock = threading.Lock()
        if self._renewer_instance is not None:
            self._renewer_instance.forget_after_fork()

    def _renewer(self) -> Renewer:
        with self._renewer_lock:
            if self._renewer_instance is None:
                self._renewer_instance = Renewer(self)
            return self._renewer_instance

    def _renew_policy(self, auto_renew: bool | AutoRenew, on_lost: OnLost | None,
                      ms: int) -> AutoRenew | None:
        if auto_renew is False:
            if on_lost is not None:
                raise InvalidArgumentError("on_lost", "needs auto_renew (only renewed locks are watched)")
            return None
        if on_lost is not None and not callable(on_lost):
            raise InvalidArgumentTypeError("on_lost", "must be callable")
        return check_policy(auto_renew, ms)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> LockClient:
        """``redis://[user:password@]host:port/db``, ``rediss://...`` (TLS) or ``unix:///path?db=N``."""
        client_kwargs = {k: kwargs.pop(k) for k in _CLIENT_KEYWORDS if k in kwargs}
        return cls(options=options_from_url(url, **kwargs), **client_kwargs)

    @classmethod
    def from_redis(cls, redis_client: Any, **kwargs: Any) -> LockClient:
        """Connect where a ``redis.Redis`` connects, with its credentials, db, TLS and timeouts."""
        client_kwargs = {k: kwargs.pop(k) for k in _CLIENT_KEYWORDS if k in kwargs}
        return cls(options=options_from_redis(redis_client, **kwargs), **client_kwargs)

    @property
    def implementation(self) -> str:
        """Which core this client encodes and parses with: "c" or "py"."""
        return str(self.core.IMPLEMENTATION)

    @property
    def chunk_size(self) -> int:
        return self._chunk_size

    # -- single locks ---------------------------------------------------------------------------

    def try_acquire(self, name: str | bytes, ttl: Seconds, *, token: bytes | None = None,
                    auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None) -> Lease | None:
        """One attempt: a ``Lease`` when the lock was free, None when someone else holds it.

        If the reply is lost after the command went out, the lock may be ours: it is released
        with our token and ``AcquireOutcomeUnknownError`` is raised. With ``auto_renew`` the
        client's renewer keeps the lock until it is released; ``on_lost(lease)`` is called if
        it is ever lost.
        """
        return self._try_acquire(name, ttl, token, auto_renew, on_lost, time.monotonic() + self._exec.timeout)

    def _try_acquire(self, name: str | bytes, ttl: Seconds, token: bytes | None, auto_renew: bool | AutoRenew,
                     on_lost: OnLost | None, deadline: float) -> Lease | None:
        key = encode_name(name)
        ms = ttl_ms(ttl)
        tok = secrets.token_bytes(TOKEN_BYTES) if token is None else check_token(token)
        policy = self._renew_policy(auto_renew, on_lost, ms)
        pool = self._pool
        conn = pool.get(deadline)
        buf = conn.buffer
        buf.append_set_nx_px(key, tok, ms)
        sent_at = time.monotonic()
        try:
            reply = conn.request(buf.take(), deadline)
        except BaseException as exc:
            pool.discard(conn)
            raise self._acquire_lost([(name, key, tok, time.monotonic() + ms / 1000.0)], exc) from None
        pool.put(conn)
        if reply is None:
            return None
        if reply == b"OK":
            lease = Lease(name, key, tok, ms, sent_at, self._owner)
            if policy is not None:
                self._renewer().add((lease,), policy, on_lost)
            return lease
        raise reply_error(reply, name)

    def release(self, lease: Lease) -> bool:
        """Delete the lock if it is still ours. False when it expired or is now someone else's
        (their key is never touched)."""
        self._check_lease(lease)
        if lease.renewal is not None:
            self._renewer().remove((lease,))
        try:
            reply = self._exec.script_one(_scripts.RELEASE, lease.key, lease.token, None)
        except Unconfirmed as exc:
            raise release_unconfirmed(self, lease, exc) from None
        return release_result(reply, lease)

    def extend(self, lease: Lease, ttl: Seconds, *, additive: bool = False) -> bool:
        """Set the lock's ttl to ``ttl`` from now if it is still ours; False when it is not (the
        lease is then lost). ``additive=True`` adds ``ttl`` to what the lease has left by the
        local clock instead (redis-py's default), never more than the server has left plus ``ttl``."""
        self._check_lease(lease)
        ms = extend_ms(lease, ttl, additive)
        sent_at = time.monotonic()
        commands_sent((lease,), sent_at, lease.expiry_after(sent_at, ms))
        try:
            reply = self._exec.script_one(_scripts.EXTEND, lease.key, lease.token, ms)
        except Unconfirmed as exc:
            commands_unknown((lease,), sent_at)
            raise extend_unconfirmed(lease, exc) from None
        except BaseException:
            commands_refused((lease,), sent_at)
            raise
        return extend_result(self, reply, lease, ms, sent_at)

    def lease(self, name: str | bytes, token: bytes) -> Lease:
        """A lease for a lock taken elsewhere (another process, another object) with ``token``,
        to extend, check or release it here. Nothing is sent: it believes in no time left
        (``valid_for() == 0``) until ``extend`` or ``check`` says more."""
        return adopted_lease(name, token, self._owner)

    def check(self, lease: Lease) -> float | None:
        """Seconds the lock has left on the server if the lease still holds it, else None."""
        self._check_lease(lease)
        try:
            reply = self._exec.script_one(_scripts.CHECK, lease.key, lease.token, None)
        except Unconfirmed as exc:
            raise exc.cause from None
        return check_result(reply, lease)

    def query(self, name: str | bytes) -> LockInfo:
        """Whether anyone holds ``name`` and for how long still (never whose it is)."""
        key = encode_name(name)
        return query_result(self._exec.pttl_one(key), name)

    def lock(self, name: str | bytes, ttl: Seconds | None = None, *, blocking: bool = True,
             timeout: Seconds | None = None, token: bytes | None = None,
             auto_renew: bool | AutoRenew | None = None, on_lost: OnLost | None = None) -> Lock:
        """A ``Lock`` object for ``name``: use it with ``with``, as a decorator, or call acquire().

        With no ``ttl`` the lock lives 30 s at a time and is renewed until released (unless
        ``auto_renew=False``). ``timeout=None`` waits until the lock is free; ``timeout=0`` or
        ``blocking=False`` makes one attempt.
        """
        from .lock import Lock

        ttl, renew = lock_ttl(ttl, auto_renew)
        return Lock(self, name, ttl, blocking=blocking, timeout=timeout, token=token, auto_renew=renew,
                    on_lost=on_lost)

    # -- bulk -----------------------------------------------------------------------------------

    def acquire_many(self, names: Sequence[str | bytes], ttl: Seconds, *, all_or_nothing: bool = False,
                     tokens: Sequence[bytes] | None = None, auto_renew: bool | AutoRenew = False,
                     on_lost: OnLost | None = None, limit: int | None = None) -> bulk.AcquireManyResult:
        """Try every name once, pipelined; a result per name in input order.

        ``tokens`` (one per name, 16+ bytes each) replaces the random ones, for holders that
        must recognise their locks after a restart. With ``auto_renew`` every lease taken is
        renewed until released; ``result.lost`` names the ones lost since.
        ``limit=k`` takes at most k *free* names instead, tried from a random point of the list
        (so workers sharing one list spread over it), one round trip per chunk: for workers
        claiming shards. The result's ``not_tried`` lists the names left untried.
        """
        policy = self._renew_policy(auto_renew, on_lost, ttl_ms(ttl))
        if limit is None:
            result = bulk.acquire_many(self, names, ttl, all_or_nothing, tokens)
        else:
            check_claim(limit, all_or_nothing)
            result = bulk_claim.claim_many(self, names, ttl, limit, tokens)
        if policy is not None:
            self._renewer().add(result.acquired, policy, on_lost)
        return result

    def release_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Release each lease that is still ours; True/False per lease in input order."""
        return bulk.release_many(self, leases)

    def extend_many(self, leases: Sequence[Lease], ttl: Seconds) -> list[bool]:
        """Extend each lease that is still ours to ``ttl`` from now; True/False per lease."""
        return bulk.extend_many(self, leases, ttl)

    def query_many(self, names: Sequence[str | bytes]) -> list[LockInfo]:
        """``query`` for every name, pipelined, in input order."""
        return bulk.query_many(self, names)

    # -- maybe-held cleanup ---------------------------------------------------------------------

    def _acquire_lost(self, attempts: Iterable[tuple[str | bytes, bytes, bytes, float]],
                      cause: BaseException) -> BaseException:
        """Maybe-held locks (name, key, token, forget_at) are released in the background; the error."""
        attempts = list(attempts)
        for _, key, token, forget_at in attempts:
            self._remember_cleanup(key, token, forget_at)
        if not isinstance(cause, Exception):
            return cause
        names = [name for name, _, _, _ in attempts]
        return AcquireOutcomeUnknownError(
            f"acquire of {_describe(names)} was sent but no reply came ({cause}); it may be held, and is "
            "released with its token in the background as soon as the server answers", names, False)

    def _remember_cleanup(self, key: bytes, token: bytes, forget_at: float) -> None:
        """Release ``key`` with ``token`` in the background, until ``forget_at`` (its key's expiry)."""
        self._cleanup.remember(key, token, forget_at)
        self._cleaner.wake()

    _abandoned = _remember_cleanup

    def _release_keys(self, keys: list[bytes], tokens: list[bytes], deadline: float) -> list[object]:
        return bulk.run_release(self, keys, tokens, deadline)

    @property
    def pending_cleanup(self) -> int:
        """Locks whose acquire or release outcome was lost and that still await a release in the
        background (at most until their ttl has passed)."""
        return len(self._cleanup)

    # -- plumbing -------------------------------------------------------------------------------

    def _check_lease(self, lease: object, argument: str = "lease") -> None:
        check_lease(lease, self._owner, Lease, argument)

    def _lease_lost(self, lease: Lease, reason: str) -> None:
        """The server said the lock is not ours any more: signal it (renewed leases through the
        renewer, so ``on_lost`` runs)."""
        renewer = self._renewer_instance
        if lease.renewal is not None and renewer is not None:
            renewer._lost(lease, reason)
        else:
            lease.mark_lost(reason)

    def close(self) -> None:
        """Stop renewing and release every auto-renewed lock still held and the maybe-held ones,
        all within one call deadline, then close every connection."""
        self._close(time.monotonic() + self._exec.timeout)

    def _close(self, deadline: float) -> None:
        if self._closed:
            return
        renewer = self._renewer_instance
        if renewer is not None:
            renewer.stop(deadline)
            held = renewer.held_leases()
            if held:
                try:
                    bulk.release_many(self, held, deadline)
                except LockError as exc:
                    log.warning("turbolock: close could not release %d renewed locks: %s", len(held), exc)
        self._cleaner.stop(deadline)
        if self._cleanup and deadline > time.monotonic():
            self._cleaner.run_once(deadline)
        self._closed = True
        self._pool.close()

    @property
    def renewing(self) -> int:
        """How many locks the renewer currently keeps."""
        renewer = self._renewer_instance
        return 0 if renewer is None else len(renewer)

    def __enter__(self) -> LockClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"LockClient({self.options.address}, db={self.options.db}, key_prefix={self.key_prefix!r}, "
                f"core={self.implementation!r})")


def _describe(names: list[str | bytes]) -> str:
    if len(names) == 1:
        return f"lock {names[0]!r}"
    shown = ", ".join(repr(n) for n in names[:5])
    return f"{len(names)} locks ({shown}{', ...' if len(names) > 5 else ''})"

