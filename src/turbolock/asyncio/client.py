"""``AsyncLockClient``: the whole API of ``LockClient`` for asyncio, on the same sans-IO core.

Every method that talks to the server is a coroutine; arguments, validation, results and
errors are the blocking client's. Commands issued by many tasks in one loop iteration leave
in one write (see ``protocol``). A task cancelled while acquiring never leaves a lock behind:
a lock its command took for nobody is released with its token as soon as the reply shows it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from types import ModuleType, TracebackType
from typing import Any

from .. import _core, _scripts
from .. import bulk as _sync_bulk
from .._claim import check_claim
from .._cleanup_book import CleanupBook, retry_delay
from .._executor import UNKNOWN, Unconfirmed
from .._lock_rules import lock_ttl
from .._ownership import Owner, check_lease
from .._replies import reply_error
from .._single_plan import (
    adopted_lease,
    check_result,
    extend_ms,
    extend_result,
    extend_unconfirmed,
    query_result,
    release_result,
    release_unconfirmed,
)
from .._validate import Seconds, check_key_prefix, check_token, encode_name, ttl_ms
from ..client import DEFAULT_CHUNK_SIZE, DEFAULT_KEY_PREFIX, _describe
from ..errors import (
    AcquireOutcomeUnknownError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockError,
)
from ..lease import Lease, LockInfo, commands_refused, commands_sent, commands_unknown
from ..options import ConnectionOptions, options_from_keywords, options_from_redis, options_from_url
from ..renewal import AutoRenew, check_policy
from . import bulk, bulk_claim
from .executor import Executor, abandon
from .lock import AsyncLock
from .pool import ConnectionPool
from .protocol import NotSent
from .renewal import OnLost, Renewer
from .tokens import TokenSource

log = logging.getLogger("turbolock")

DEFAULT_MAX_CONNECTIONS = 1
"""Pipelining connections per client. One carries any number of tasks' commands, one write per
loop iteration; measured with 64 tasks, a second one cost 10-25% of the pairs per second (two
writes per iteration instead of one). More help when bulk calls would hold up small ones."""

_CLIENT_KEYWORDS = ("key_prefix", "max_connections", "chunk_size", "core")


class AsyncLockClient:
    """A lock client for one Redis server, for asyncio; share one per event loop.

    ``timeout`` bounds every call (a bulk call gets it per chunk); ``connect_timeout`` bounds
    opening a connection. Every lock key is ``key_prefix + name``. ``core`` picks the codec:
    "c", "py", or None for the compiled one when it is installed. ``max_connections`` is how
    many pipelining connections it keeps (each carries any number of concurrent calls).
    Connections are opened on first use, in the running loop; the client belongs to that loop.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, *,
                 key_prefix: str | bytes = DEFAULT_KEY_PREFIX, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, core: str | None = None, **connection: Any) -> None:
        options = connection.pop("options", None)
        if options is None:
            options = options_from_keywords(host=host, port=port, **connection)
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise InvalidArgumentError("max_connections", "must be a positive int")
        self._chunk_size = _sync_bulk.check_chunk_size(chunk_size)
        self.options: ConnectionOptions = options
        self.key_prefix = check_key_prefix(key_prefix)
        self.core: ModuleType = _core.get_core(core)
        self._pool = ConnectionPool(options, self.core, self.key_prefix, max_connections, self._on_orphan)
        self._exec = Executor(self._pool, self._chunk_size)
        self._owner = Owner()
        self._tokens = TokenSource()
        self._cleanup = CleanupBook()
        self._cleanup_runner: asyncio.Task[None] | None = None
        self._renewer_instance: Renewer | None = None
        self._closed = False

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> AsyncLockClient:
        """``redis://[user:password@]host:port/db``, ``rediss://...`` (TLS) or ``unix:///path?db=N``."""
        client_kwargs = {k: kwargs.pop(k) for k in _CLIENT_KEYWORDS if k in kwargs}
        return cls(options=options_from_url(url, **kwargs), **client_kwargs)

    @classmethod
    def from_redis(cls, redis_client: Any, **kwargs: Any) -> AsyncLockClient:
        """Connect where a ``redis.Redis`` (or ``redis.asyncio.Redis``) connects, with its
        credentials, db, TLS and timeouts."""
        client_kwargs = {k: kwargs.pop(k) for k in _CLIENT_KEYWORDS if k in kwargs}
        return cls(options=options_from_redis(redis_client, **kwargs), **client_kwargs)

    @property
    def implementation(self) -> str:
        """Which core this client encodes and parses with: "c" or "py"."""
        return str(self.core.IMPLEMENTATION)

    @property
    def chunk_size(self) -> int:
        return self._chunk_size

    @property
    def max_connections(self) -> int:
        return self._pool.size

    def _renewer(self) -> Renewer:
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

    # -- single locks ---------------------------------------------------------------------------

    async def try_acquire(self, name: str | bytes, ttl: Seconds, *, token: bytes | None = None,
                          auto_renew: bool | AutoRenew = False,
                          on_lost: OnLost | None = None) -> Lease | None:
        """One attempt: a ``Lease`` when the lock was free, None when someone else holds it.

        If the reply is lost after the command went out, the lock may be ours: it is released
        with our token and ``AcquireOutcomeUnknownError`` is raised. If the calling task is
        cancelled after the command went out, a lock it took is released once the reply comes.
        With ``auto_renew`` the client's renewer keeps the lock until it is released;
        ``on_lost(lease)`` (a function or a coroutine function) is called if it is ever lost.
        """
        key = encode_name(name)
        ms = ttl_ms(ttl)
        tok = self._tokens.take() if token is None else check_token(token)
        policy = self._renew_policy(auto_renew, on_lost, ms)
        conn = self._pool.ready() or await self._pool.connect()
        conn.buffer.append_set_nx_px(key, tok, ms)
        sent_at = time.monotonic()
        tag = (key, tok, ms)
        try:
            fut = conn.submit(1, tag)
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
            raise self._acquire_lost([(name, key, tok, time.monotonic() + ms / 1000.0)], exc) from None
        if reply is None:
            return None
        if reply == b"OK":
            lease = Lease(name, key, tok, ms, sent_at, self._owner)
            if policy is not None:
                self._renewer().add((lease,), policy, on_lost)
            return lease
        raise reply_error(reply, name)

    async def release(self, lease: Lease) -> bool:
        """Delete the lock if it is still ours. False when it expired or is now someone else's
        (their key is never touched). A release whose task is cancelled once it has started is
        finished in the background."""
        self._check_lease(lease)
        if lease.renewal is not None:
            self._renewer().remove((lease,))
        try:
            reply = await self._exec.script_one(_scripts.RELEASE, lease.key, lease.token, None)
        except Unconfirmed as exc:
            raise release_unconfirmed(self, lease, exc) from None
        except asyncio.CancelledError:
            # Cancelled before the command went out: the release is still owed, in the background.
            self._remember_cleanup(lease.key, lease.token, time.monotonic() + lease.ttl_ms / 1000.0)
            raise
        return release_result(reply, lease)

    async def extend(self, lease: Lease, ttl: Seconds, *, additive: bool = False) -> bool:
        """Set the lock's ttl to ``ttl`` from now if it is still ours; False when it is not (the
        lease is then lost). ``additive=True`` adds ``ttl`` to what the lease has left instead."""
        self._check_lease(lease)
        ms = extend_ms(lease, ttl, additive)
        sent_at = time.monotonic()
        commands_sent((lease,), sent_at, lease.expiry_after(sent_at, ms))
        try:
            reply = await self._exec.script_one(_scripts.EXTEND, lease.key, lease.token, ms)
        except Unconfirmed as exc:
            commands_unknown((lease,), sent_at)
            raise extend_unconfirmed(lease, exc) from None
        except BaseException:
            commands_refused((lease,), sent_at)
            raise
        return extend_result(self, reply, lease, ms, sent_at)

    def lease(self, name: str | bytes, token: bytes) -> Lease:
        """A lease for a lock taken elsewhere with ``token``, to extend, check or release it here
        (see ``LockClient.lease``)."""
        return adopted_lease(name, token, self._owner)

    async def check(self, lease: Lease) -> float | None:
        """Seconds the lock has left on the server if the lease still holds it, else None."""
        self._check_lease(lease)
        try:
            reply = await self._exec.script_one(_scripts.CHECK, lease.key, lease.token, None)
        except Unconfirmed as exc:
            raise exc.cause from None
        return check_result(reply, lease)

    async def query(self, name: str | bytes) -> LockInfo:
        """Whether anyone holds ``name`` and for how long still (never whose it is)."""
        key = encode_name(name)
        return query_result(await self._exec.pttl_one(key), name)

    def lock(self, name: str | bytes, ttl: Seconds | None = None, *, blocking: bool = True,
             timeout: Seconds | None = None, token: bytes | None = None,
             auto_renew: bool | AutoRenew | None = None, on_lost: OnLost | None = None) -> AsyncLock:
        """An ``AsyncLock`` for ``name``: ``async with``, a decorator for coroutines, or acquire().
        With no ``ttl``: 30 s renewed until released, as for every Lock."""
        ttl, renew = lock_ttl(ttl, auto_renew)
        return AsyncLock(self, name, ttl, blocking=blocking, timeout=timeout, token=token,
                         auto_renew=renew, on_lost=on_lost)

    async def wait_lost(self, lease: Lease, timeout: Seconds | None = None) -> bool:
        """Wait until the renewer finds an auto-renewed ``lease`` lost: True when it was (or is),
        False when ``timeout`` passed first or the lease was released. The asyncio counterpart
        of ``lease.lost.wait()``."""
        self._check_lease(lease)
        return await self._renewer().wait_lost(lease, timeout)

    # -- bulk -----------------------------------------------------------------------------------

    async def acquire_many(self, names: Sequence[str | bytes], ttl: Seconds, *, all_or_nothing: bool = False,
                           tokens: Sequence[bytes] | None = None, auto_renew: bool | AutoRenew = False,
                           on_lost: OnLost | None = None,
                           limit: int | None = None) -> _sync_bulk.AcquireManyResult:
        """Try every name once, pipelined; a result per name in input order (see
        ``LockClient.acquire_many``)."""
        policy = self._renew_policy(auto_renew, on_lost, ttl_ms(ttl))
        if limit is None:
            result = await bulk.acquire_many(self, names, ttl, all_or_nothing, tokens)
        else:
            check_claim(limit, all_or_nothing)
            result = await bulk_claim.claim_many(self, names, ttl, limit, tokens)
        if policy is not None:
            self._renewer().add(result.acquired, policy, on_lost)
        return result

    async def release_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Release each lease that is still ours; True/False per lease in input order."""
        return await bulk.release_many(self, leases)

    async def extend_many(self, leases: Sequence[Lease], ttl: Seconds) -> list[bool]:
        """Extend each lease that is still ours to ``ttl`` from now; True/False per lease."""
        return await bulk.extend_many(self, leases, ttl)

    async def query_many(self, names: Sequence[str | bytes]) -> list[LockInfo]:
        """``query`` for every name, pipelined, in input order."""
        return await bulk.query_many(self, names)

    # -- maybe-held cleanup ---------------------------------------------------------------------

    def _on_orphan(self, tag: Any, reply: object) -> None:
        """An acquire's reply came (or was lost) after its caller stopped waiting: a lock it
        took, or may have taken, is released with its token."""
        keys, tokens, ttl = tag
        forget_at = time.monotonic() + ttl / 1000.0
        if type(keys) is bytes:
            if reply is UNKNOWN or reply == b"OK":
                self._remember_cleanup(keys, tokens, forget_at)
            return
        replies: Any = [reply] * len(keys) if reply is UNKNOWN or len(keys) == 1 else reply
        for key, token, one in zip(keys, tokens, replies, strict=True):
            if one is UNKNOWN or one == b"OK":
                self._remember_cleanup(key, token, forget_at)

    def _remember_cleanup(self, key: bytes, token: bytes, forget_at: float) -> None:
        """Release ``key`` with ``token`` in the background, until ``forget_at`` (its key's expiry)."""
        self._cleanup.remember(key, token, forget_at)
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
            return True
        replies: list[object] | None = None
        try:
            replies = await bulk.run_release(self, [e[0] for e in entries], [e[1] for e in entries])
        except LockError as exc:
            log.debug("turbolock: release of %d maybe-held locks failed: %s", len(entries), exc)
        finally:
            self._cleanup.settle(entries, replies)
        return not self._cleanup

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

    @property
    def pending_cleanup(self) -> int:
        """Locks whose acquire or release outcome was lost (or whose acquiring task was
        cancelled) and that still await a release in the background, those being released right
        now included; each at most until its ttl has passed."""
        return len(self._cleanup)

    def _lease_lost(self, lease: Lease, reason: str) -> None:
        """The server said the lock is not ours any more: signal it."""
        renewer = self._renewer_instance
        if lease.renewal is not None and renewer is not None:
            renewer._lost(lease, reason)
        else:
            lease.mark_lost(reason)

    # -- plumbing -------------------------------------------------------------------------------

    def _check_lease(self, lease: object, argument: str = "lease") -> None:
        check_lease(lease, self._owner, Lease, argument)

    async def close(self) -> None:
        """Stop renewing and release every auto-renewed lock still held, release maybe-held
        locks (one try), then close every connection."""
        if self._closed:
            return
        self._pool.adopt_running_loop()  # LockUsageError before anything is touched, if it must
        deadline = time.monotonic() + self.options.timeout
        renewer = self._renewer_instance
        if renewer is not None:
            await renewer.stop()
            held = renewer.held_leases()
            if held:
                try:
                    await self.release_many(held)
                except LockError as exc:
                    log.warning("turbolock: close could not release %d renewed locks: %s", len(held), exc)
        if self._cleanup:
            try:
                await asyncio.wait_for(self._cleanup_once(), max(0.0, deadline - time.monotonic()))
            except (LockError, asyncio.TimeoutError) as exc:
                log.debug("turbolock: cleanup at close failed: %s", exc)
        self._closed = True
        runner = self._cleanup_runner
        if runner is not None and not runner.done() and runner.get_loop() is asyncio.get_running_loop():
            runner.cancel()
            await asyncio.wait([runner])
        await self._pool.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def renewing(self) -> int:
        """How many locks the renewer currently keeps."""
        renewer = self._renewer_instance
        return 0 if renewer is None else len(renewer)

    async def __aenter__(self) -> AsyncLockClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def __repr__(self) -> str:
        return (f"AsyncLockClient({self.options.address}, db={self.options.db}, "
                f"key_prefix={self.key_prefix!r}, core={self.implementation!r})")

