"""Runs encoded lock commands on the pool's connections, for one lock or for many: the rules of
the blocking ``_executor`` (deadlines, NOSCRIPT reloads in the same write, outcomes of a broken
connection) on asyncio, where a cancelled caller is one more way for a reply to go unread.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from turbolock._aio.pool import ConnectionPool, deadline_passed
from turbolock._aio.protocol import RedisProtocol
from turbolock._aio.waiting import done_by, finished_within
from turbolock._flows.bulk_plan import (
    OrphanHandler,
    OrphanTags,
    OwnTokensTag,
    hand_over,
    raw_replies_tag,
    subset_orphans,
)
from turbolock._wire import scripts as _scripts
from turbolock._wire import set_ifeq
from turbolock._wire.outcomes import (
    NOT_SENT,
    RELOAD_FLOOR,
    UNKNOWN,
    WINDOW,
    Encoder,
    NotSent,
    Reencoder,
    ReplyHandler,
    ReplyShape,
    Unconfirmed,
    bulk_budget,
    check_loaded,
    durable_reply,
    durable_wait,
    floored,
    mark_not_durable,
    noscript_indices,
    wait_command,
)
from turbolock.errors import ReplyError, TimeoutError

DEADLINE_TOLERANCE = 0.01
"""A call's deadline this close to the end of its connection's own timeout is left to that timeout
(no wait of its own: the usual case, a call that went straight to its node)."""


def _script_load(conn: RedisProtocol, script: _scripts.Script) -> None:
    conn.buffer.append_command((b"SCRIPT", b"LOAD", script.source))


def abandon(fut: asyncio.Future[Any], orphan: Any, on_orphan: OrphanHandler) -> None:
    """Nobody will read ``fut``'s reply: a reply still to come is consumed and dropped by the
    protocol (and its orphan tag handled there); one already here is handled now."""
    if not fut.done():
        fut.cancel()
    elif fut.cancelled():
        return
    else:
        error = fut.exception()
        if orphan is None:
            return
        if error is None:
            on_orphan(orphan, fut.result())
        elif not isinstance(error, NotSent):
            on_orphan(orphan, UNKNOWN)


class Executor:
    __slots__ = ("pool", "chunk_size", "wait", "replicas")

    guarded = False
    """Whether every call goes through a guard of the master's (a Sentinel's: the client's fast
    paths that write on the pool's connection themselves are not taken)."""

    def __init__(self, pool: ConnectionPool, chunk_size: int) -> None:
        self.pool = pool
        self.chunk_size = chunk_size
        options = pool.options
        self.replicas = options.replicas_ack
        self.wait = wait_command(options.replicas_ack, options.replicas_timeout)
        """``WAIT`` to send after acquires (``replicas_ack``), or None."""

    def offers_set_ifeq(self) -> bool:
        """Whether the server offers ``SET ... IFEQ``, as the pool's newest connection's handshake said."""
        return self.pool.set_ifeq

    def _refuse_past(self, deadline: float) -> None:
        """Nothing is sent once a call's ``deadline`` has passed (a call that spent its time
        elsewhere: a Redis Cluster's map read)."""
        if deadline <= time.monotonic():
            raise deadline_passed(self.pool.server)

    def _by(self, fut: asyncio.Future[Any], deadline: float | None, orphan: Any = None) -> Awaitable[Any]:
        """``fut`` itself to await (the hot path: no coroutine of its own), or, when ``deadline``
        comes well before the connection's own timeout would (a call that spent part of its time
        elsewhere), a wait for it that ends by then (``_bounded``)."""
        if deadline is None or deadline - time.monotonic() > self.pool.options.timeout - DEADLINE_TOLERANCE:
            return fut  # the protocol's own timeout ends the wait by then
        return self._bounded(fut, deadline, orphan)

    async def _bounded(self, fut: asyncio.Future[Any], deadline: float, orphan: Any) -> Any:
        """``fut``'s reply by ``deadline``. Past it, the reply is left to the protocol (an
        acquire's lock, ``orphan``, released by the pool's ``on_orphan`` once it comes) and
        ``TimeoutError`` raised: the connection, which other calls share, is not broken for one
        call's shorter deadline."""
        if not await finished_within(fut, deadline - time.monotonic()):
            abandon(fut, orphan, self.pool.on_orphan)
            raise TimeoutError(f"{self.pool.server} did not answer within the call's deadline")
        return fut.result()

    def _wait_after(self, conn: RedisProtocol, since: float | None = None) -> asyncio.Future[Any] | None:
        """``WAIT`` in the same write as what was just submitted on ``conn`` (an acquire, with
        ``replicas_ack``): its reply's future, due by the same deadline; None without
        ``replicas_ack``, or when the connection broke meanwhile (then nothing can tell)."""
        if self.wait is None:
            return None
        conn.buffer.append_command(self.wait)
        try:
            return conn.submit(1, None, since)
        except NotSent:
            return None

    async def _acked(self, acked: asyncio.Future[Any] | None, deadline: float | None = None) -> object:
        """How many replicas have the connection's writes (``_wait_after``'s reply), None when it
        cannot tell (no reply by ``deadline``, a broken connection)."""
        if acked is None:
            return None
        try:
            return await self._by(acked, deadline)
        except Exception:
            abandon(acked, None, self.pool.on_orphan)
            return None

    async def pttl_one(self, key: bytes, deadline: float | None = None) -> object:
        """PTTL of one lock key. Transport errors propagate. Every call here is bounded by the
        connection's timeout, and by ``deadline`` when one is given (a Redis Cluster's flows pass it)."""
        conn, since = self.pool.ready(), None
        if conn is None:
            conn, since = await self.pool.connect_since(deadline)
        elif deadline is not None:
            self._refuse_past(deadline)
        conn.buffer.append_pttl(key)
        try:
            return await self._by(conn.submit(1, None, since), deadline)
        except NotSent as exc:
            raise exc.cause from None

    async def command_one(self, args: tuple[bytes, ...], deadline: float | None = None) -> object:
        """Any one command that changes nothing (``SENTINEL ...``), within the connection's
        timeout and ``deadline`` (the connect included). Transport errors propagate."""
        if deadline is None:
            return await self._command_one(args)
        return await done_by(self._command_one(args), deadline, self.pool.server)

    async def _command_one(self, args: tuple[bytes, ...]) -> object:
        conn, since = self.pool.ready(), None
        if conn is None:
            conn, since = await self.pool.connect_since()
        conn.buffer.append_command(args)
        try:
            return await conn.submit(1, None, since)
        except NotSent as exc:
            raise exc.cause from None

    async def set_nx_one(self, key: bytes, token: bytes, ttl_ms: int, deadline: float | None = None,
                         own_token: bool = False) -> object:
        """``SET key token NX PX ttl_ms``; ``Unconfirmed`` when it was written and no reply came. A
        cancelled caller's lock is released once its reply comes (the pool's ``on_orphan``; again
        later when found free, for a token the client made: ``own_token``). With ``replicas_ack``,
        ``WAIT`` goes in the same write, due by the same deadline."""
        conn, since = self.pool.ready(), None
        if conn is None:
            conn, since = await self.pool.connect_since(deadline)
        elif deadline is not None:
            self._refuse_past(deadline)
        conn.buffer.append_set_nx_px(key, token, ttl_ms)
        tag = OwnTokensTag((key, token, ttl_ms)) if own_token else (key, token, ttl_ms)
        try:
            fut = conn.submit(1, tag, since)
        except NotSent as exc:
            raise exc.cause from None
        acked = self._wait_after(conn, since)
        try:
            reply = await self._by(fut, deadline, tag)
        except BaseException as exc:
            if acked is not None:
                abandon(acked, None, self.pool.on_orphan)  # its reply is dropped when it comes
            if isinstance(exc, NotSent):
                raise exc.cause from None
            if isinstance(exc, asyncio.CancelledError):
                abandon(fut, tag, self.pool.on_orphan)
                raise
            raise Unconfirmed(exc) from None
        if self.wait is None:
            return reply
        return await self._confirm(reply, acked, tag, deadline)

    async def _confirm(self, reply: object, acked: asyncio.Future[Any] | None, tag: Any,
                      deadline: float | None = None) -> object:
        """An acquire's ``reply`` once its ``WAIT`` (``_wait_after``) says whether enough replicas
        have it (``NOT_DURABLE`` when not, or when no answer came by the call's deadline); a caller
        cancelled meanwhile leaves the lock to ``on_orphan`` with ``tag``."""
        try:
            count = await self._acked(acked, deadline)
        except asyncio.CancelledError:
            if acked is not None:
                abandon(acked, None, self.pool.on_orphan)
            self.pool.on_orphan(tag, reply)  # a lock taken that nobody will hold
            raise
        return durable_reply(reply, count, self.replicas)

    async def asking_one(self, append: Callable[[Any], None], deadline: float | None = None,
                         script: _scripts.Script | None = None, durable: bool = False) -> object:
        """``ASKING`` and the command ``append(buf)`` writes (a Redis Cluster slot being migrated
        here); a script this node does not know yet is loaded and run again. ``Unconfirmed``
        when the command was written and no reply came. ``durable``: an acquire, followed by
        ``WAIT`` when the client waits for replicas."""
        conn, since = self.pool.ready(), None
        if conn is None:
            conn, since = await self.pool.connect_since(deadline)
        elif deadline is not None:
            self._refuse_past(deadline)
        buf = conn.buffer
        buf.append_command((b"ASKING",))
        append(buf)
        wait = self.wait if durable else None
        if wait is not None:
            buf.append_command(wait)
        loaded: object = None
        try:
            if wait is None:
                reply = (await self._by(conn.submit(2, None, since), deadline))[1]
            else:
                _, reply, acked = await self._by(conn.submit(3, None, since), deadline)
                reply = durable_reply(reply, acked, self.replicas)
            if script is not None and type(reply) is ReplyError and reply.code == "NOSCRIPT":
                _script_load(conn, script)
                buf.append_command((b"ASKING",))
                append(buf)
                loaded, _, reply = await self._by(conn.submit(3, None, since), deadline)
        except NotSent as exc:
            raise exc.cause from None
        except BaseException as exc:
            raise Unconfirmed(exc) from None
        if script is not None:
            check_loaded([loaded], script)
        return reply

    async def script_one(self, script: _scripts.Script, key: bytes, token: bytes,
                         ttl_ms: int | None, deadline: float | None = None) -> object:
        """EVALSHA of a single-key script; on NOSCRIPT, SCRIPT LOAD and the retry go out together.
        EXTEND goes as ``SET ... IFEQ`` where the connection's server offers it (``_wire.set_ifeq``).

        A failure after the command was written (a broken connection, a deadline, a cancelled
        caller) raises ``Unconfirmed``; a failure before anything was sent propagates as it is.
        """
        conn, since = self.pool.ready(), None
        if conn is None:
            conn, since = await self.pool.connect_since(deadline)
        elif deadline is not None:
            self._refuse_past(deadline)
        buf = conn.buffer
        # Only EXTEND ever goes as SET IFEQ: a release (the hot path) reads one flag, calls nothing.
        as_set = conn.set_ifeq and script is _scripts.EXTEND and ttl_ms is not None
        if as_set:
            set_ifeq.append(buf, key, token, ttl_ms)  # type: ignore[arg-type]
        else:
            script.append(buf, key, token, ttl_ms)
        loaded: object = None
        # The NOSCRIPT retry is due when the command was: one deadline for both. Only the retry
        # is submitted with it (a ``since`` makes the protocol re-arm its timer: not on every call).
        sent_at = time.monotonic()  # the loop's clock is asked only for a retry: it costs a call
        try:
            reply = await self._by(conn.submit(1, None, since), deadline)
            if as_set:
                reply = set_ifeq.as_script_reply(reply)
            elif type(reply) is ReplyError and reply.code == "NOSCRIPT":
                _script_load(conn, script)
                script.append(buf, key, token, ttl_ms)
                if since is None:
                    since = conn.loop.time() - (time.monotonic() - sent_at)
                loaded, reply = await self._by(conn.submit(2, None, since), deadline)
        except NotSent as exc:
            raise exc.cause from None
        except BaseException as exc:
            raise Unconfirmed(exc) from None
        check_loaded([loaded], script)
        return reply

    async def many(self, count: int, encode: Encoder, script: _scripts.Script | None = None,
                   reencode: Reencoder | None = None, on_replies: ReplyHandler | None = None,
                   orphans: OrphanTags | None = None, chunk_size: int | None = None,
                   keys: Any = None, deadline: float = math.inf, durable: bool = False,
                   shape: ReplyShape | None = None, read_only: bool = False) -> list[object]:
        """Replies for ``count`` items in input order; an item whose outcome the connection lost
        is ``UNKNOWN`` and one never sent is ``NOT_SENT``. Error replies stay in the list.
        ``read_only`` (queries: nothing to settle): a reply the timeout cut raises its
        ``TimeoutError`` instead.

        Chunks of ``chunk_size`` commands, two in flight. Items answered NOSCRIPT are sent again
        after loading the script, encoded by ``reencode(buf, indices)``. ``on_replies(start,
        replies)`` sees each chunk as it arrives. A ``deadline`` that passed before anything was
        written raises ``UnsentTimeoutError``. A cancelled caller leaves every chunk's reply
        to the protocol, which hands acquires' replies to ``on_orphan`` with ``orphans(start,
        stop)`` as the tag. ``durable`` (acquires): with ``replicas_ack``, ``WAIT`` goes in the last
        chunk's write, due by its deadline, and every lock taken becomes ``NOT_DURABLE`` when too
        few replicas have it (or when no answer came).
        ``shape``: items that answer several replies each (transactions), one reply per item all
        the same (a cancelled caller's chunks reach the protocol's orphans unfolded: see
        ``bulk_plan.raw_replies_tag``).
        """
        results: list[object] = [NOT_SENT] * count
        if not count:
            return results
        durable = durable_wait(self.wait, durable, script) is not None
        size = self.chunk_size if chunk_size is None else chunk_size
        began = time.monotonic()
        conn, since = self.pool.ready(), None
        bounded = deadline != math.inf  # a renewal round's, a Redis Cluster master's share of one
        if conn is None:
            conn, since = await self.pool.connect_since(deadline if bounded else None)
        elif bounded:
            self._refuse_past(deadline)

        answered = 0

        def store(start: int, replies: list[object]) -> None:
            nonlocal answered
            results[start:start + len(replies)] = replies
            answered = start + len(replies)
            if on_replies is not None:
                on_replies(start, replies)

        try:
            acked = await _run_chunks(conn, count, size, encode, store, results, orphans, since, shape,
                                      deadline if bounded else None, self._wait_after if durable else None,
                                      read_only)
            if script is not None and reencode is not None:
                # Within the call's budget (a timeout a chunk), not a new one: a floor to send it in.
                ends = began + bulk_budget(self.pool.options.timeout, count, size)
                await self._reload_and_retry(script, reencode, results, size, orphans,
                                             floored(ends, RELOAD_FLOOR, deadline))
            if durable:
                count_acked = await self._acked(acked, deadline if bounded else None)
                mark_not_durable(results, count_acked, self.replicas)
        except BaseException as exc:
            # Cancelled: the chunks answered so far are only here when no on_replies took them (a
            # Sentinel's or a Redis Cluster master's share); those in flight the protocol hands over.
            if not isinstance(exc, Exception) and on_replies is None and orphans is not None and answered:
                hand_over(self.pool.on_orphan, orphans, 0, results[:answered])
            raise
        return results

    async def _reload_and_retry(self, script: _scripts.Script, reencode: Reencoder, results: list[object],
                                size: int, orphans: OrphanTags | None = None,
                                deadline: float | None = None) -> None:
        """Items answered NOSCRIPT sent again after SCRIPT LOAD, their replies in by ``deadline``
        (monotonic; those not in are left to the protocol, ``UNKNOWN``)."""
        missing = noscript_indices(results)
        if not missing:
            return
        # A caller cancelled during the retry still has its locks released.
        retried = None if orphans is None else subset_orphans(orphans, missing)

        conn = self.pool.ready() or await self.pool.connect()
        sub_results: list[object] = [NOT_SENT] * len(missing)

        def encode(buf: Any, start: int, stop: int) -> None:
            reencode(buf, missing[start:stop])

        answered: list[tuple[int, list[object]]] = []

        def store(start: int, replies: list[object]) -> None:
            sub_results[start:start + len(replies)] = replies
            answered.append((start, replies))

        _script_load(conn, script)
        try:
            load = conn.submit(1)
        except NotSent:
            for i in missing:
                results[i] = NOT_SENT
            return
        try:
            await _run_chunks(conn, len(missing), size, encode, store, sub_results, retried,
                              deadline=deadline)
        except BaseException:
            # Cancelled mid-retry: the chunks already answered took locks nobody will settle (the
            # caller's plan sees the retry's replies only when ``many`` returns); they go to the
            # orphan handler as the chunks still in flight do.
            if retried is not None:
                for start, replies in answered:
                    hand_over(conn.on_orphan, retried, start, replies)
            raise
        finally:
            for j, i in enumerate(missing):
                results[i] = sub_results[j]
            if not load.done():
                load.cancel()
        if not load.cancelled() and load.exception() is None:
            check_loaded([load.result()], script)


async def _run_chunks(conn: RedisProtocol, count: int, size: int, encode: Encoder,
                      on_replies: ReplyHandler, results: list[object], orphans: OrphanTags | None,
                      since: float | None = None, shape: ReplyShape | None = None,
                      deadline: float | None = None,
                      after_last: Callable[[RedisProtocol, float | None], asyncio.Future[Any] | None] | None
                      = None, read_only: bool = False) -> asyncio.Future[Any] | None:
    """Send items 0..count-1 in chunks of ``size``, two chunks in flight; a broken connection
    marks items ``UNKNOWN`` (sent) or leaves them ``NOT_SENT`` instead of raising. ``since``: the
    first chunk's deadline counts from then (the call waited for its connection to open).
    ``deadline`` (monotonic; a renewal round's): replies not in by then are left to the protocol
    and their items ``UNKNOWN``, the rest ``NOT_SENT`` (the connection, shared, is not broken).
    ``after_last(conn, since)`` submits what goes in the last chunk's write (WAIT): its future is
    returned once every chunk is answered, None when the items did not all go out or answer.
    ``read_only``: a reply the connection's timeout or ``deadline`` cut raises TimeoutError instead."""
    buf = conn.buffer
    inflight: deque[tuple[int, int, asyncio.Future[Any], Any]] = deque()
    next_start = 0
    tail: asyncio.Future[Any] | None = None
    try:
        while next_start < count or inflight:
            while len(inflight) < WINDOW and next_start < count:
                stop = min(count, next_start + size)
                encode(buf, next_start, stop)
                tag = orphans(next_start, stop) if orphans is not None else None
                replies_due = stop - next_start
                if shape is not None:
                    replies_due = shape.count(next_start, stop)
                    tag = None if tag is None else raw_replies_tag(tag)
                try:
                    fut = conn.submit(replies_due, tag, since if next_start == 0 else None)
                except NotSent:  # broken, or retired: the rest stays NOT_SENT, the chunks sent are answered
                    count = next_start
                    break
                if stop == count and after_last is not None:
                    tail = after_last(conn, since if next_start == 0 else None)
                conn.flush()  # the server starts on this chunk while the next one is encoded
                inflight.append((next_start, stop, fut, tag))
                next_start = stop
            if not inflight:
                break
            start, stop, fut, _ = inflight[0]
            if deadline is None:
                replies = await fut
            else:
                if not await finished_within(fut, deadline - time.monotonic()):
                    for first, last, late, tag in inflight:
                        abandon(late, tag, conn.on_orphan)
                        results[first:last] = [UNKNOWN] * (last - first)
                    _drop(tail, conn)
                    if read_only:  # re-raised below: every future in flight is abandoned, so done
                        raise TimeoutError(f"{conn.address} did not answer within the call's deadline")
                    return None
                replies = fut.result()
            inflight.popleft()
            if shape is not None:
                replies = shape.fold(start, stop, replies)
            on_replies(start, replies if stop - start > 1 or shape is not None else [replies])
    except BaseException as exc:
        _drop(tail, conn)
        if isinstance(exc, Exception) and all(fut.done() for _, _, fut, _ in inflight):
            if read_only and isinstance(exc, TimeoutError):
                raise
            _settle_broken(inflight, results)
            return None
        for _, _, fut, tag in inflight:
            abandon(fut, tag, conn.on_orphan)
        raise
    return tail


def _drop(tail: asyncio.Future[Any] | None, conn: RedisProtocol) -> None:
    if tail is not None:
        abandon(tail, None, conn.on_orphan)  # its reply is dropped when it comes


def _settle_broken(inflight: deque[tuple[int, int, asyncio.Future[Any], Any]], results: list[object]) -> None:
    for start, stop, fut, _ in inflight:
        error = None if fut.cancelled() else fut.exception()
        if isinstance(error, NotSent):
            continue
        for i in range(start, stop):
            results[i] = UNKNOWN
