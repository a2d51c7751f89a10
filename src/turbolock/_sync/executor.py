"""Runs encoded lock commands on a pooled connection, for one lock or for many.

It owns the rules every operation shares: one deadline per call (per chunk for bulk calls),
a connection that failed mid-call is discarded, and a script the server forgot (NOSCRIPT,
after SCRIPT FLUSH or a restart) is loaded again in the same write as the retried commands.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from turbolock._flows.bulk_plan import OrphanHandler, OrphanTags, hand_over, subset_orphans
from turbolock._sync.connection import Connection
from turbolock._sync.pipeline import PipelineBroken, run_chunks
from turbolock._sync.pool import ConnectionPool
from turbolock._wire import scripts as _scripts
from turbolock._wire import set_ifeq
from turbolock._wire.outcomes import (
    NOT_SENT,
    RELOAD_FLOOR,
    UNKNOWN,
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


def _encoded(conn: Connection, command: tuple[bytes, ...]) -> bytes:
    buf = conn.buffer
    buf.append_command(command)
    data: bytes = buf.take()
    return data


def _script_load(conn: Connection, script: _scripts.Script) -> bytes:
    return _encoded(conn, (b"SCRIPT", b"LOAD", script.source))


class Executor:
    """The ``Server`` of one Redis server (``_flows/topology``), over a pool of connections."""

    __slots__ = ("pool", "timeout", "chunk_size", "wait", "replicas", "on_orphan")

    def __init__(self, pool: ConnectionPool, timeout: float, chunk_size: int,
                 on_orphan: OrphanHandler | None = None) -> None:
        self.pool = pool
        self.timeout = timeout
        self.chunk_size = chunk_size
        self.on_orphan = on_orphan
        """Where an interrupted bulk acquire's maybe-taken locks go (``bulk_plan.release_orphan``)."""
        options = pool.options
        self.replicas = options.replicas_ack
        self.wait = wait_command(options.replicas_ack, options.replicas_timeout)
        """``WAIT`` to send after acquires (``replicas_ack``), or None."""

    def offers_set_ifeq(self) -> bool:
        """Whether the server offers ``SET ... IFEQ``, as the pool's newest connection's handshake said."""
        return self.pool.set_ifeq

    def pttl_one(self, key: bytes, deadline: float | None = None) -> object:
        """PTTL of one lock key. Transport errors propagate."""
        return self._read_one(lambda buf: buf.append_pttl(key),
                              time.monotonic() + self.timeout if deadline is None else deadline)

    def command_one(self, args: tuple[bytes, ...], deadline: float) -> object:
        """Any one command that changes nothing (``CLUSTER SHARDS``...). Transport errors propagate."""
        return self._read_one(lambda buf: buf.append_command(args), deadline)

    def _read_one(self, append: Callable[[Any], None], deadline: float) -> object:
        pool = self.pool
        conn = pool.get(deadline)
        try:
            buf = conn.buffer
            append(buf)
            reply = conn.request(buf.take(), deadline)
        except NotSent as late:
            pool.put(conn)
            raise late.cause from None
        except BaseException:
            pool.discard(conn)
            raise
        pool.put(conn)
        return reply

    def set_nx_one(self, key: bytes, token: bytes, ttl_ms: int, deadline: float) -> object:
        """``SET key token NX PX ttl_ms``; ``Unconfirmed`` when it was written and no reply came
        (errors before that, no connection, propagate)."""
        pool = self.pool
        conn = pool.get(deadline)
        buf = conn.buffer
        buf.append_set_nx_px(key, token, ttl_ms)
        wait = self.wait
        try:
            if wait is None:
                reply = conn.request(buf.take(), deadline)
            else:  # in the same write: WAIT counts the replicas that have this connection's writes
                buf.append_command(wait)
                reply, acked = conn.roundtrip(buf.take(), 2, deadline)
                reply = durable_reply(reply, acked, self.replicas)
        except NotSent as late:  # nothing was written: nothing can be held
            pool.put(conn)
            raise late.cause from None
        except BaseException as exc:
            pool.discard(conn)
            raise Unconfirmed(exc) from None
        pool.put(conn)
        return reply

    def asking_one(self, append: Callable[[Any], None], deadline: float,
                   script: _scripts.Script | None = None, durable: bool = False) -> object:
        """``ASKING`` and the command ``append(buf)`` writes (a Redis Cluster slot being migrated
        here); a script this node does not know yet is loaded and run again. ``Unconfirmed``
        when the command was written and no reply came. ``durable``: an acquire, followed by
        ``WAIT`` when the client waits for replicas."""
        pool = self.pool
        conn = pool.get(deadline)
        buf = conn.buffer
        wait = self.wait if durable else None
        try:
            buf.append_command((b"ASKING",))
            append(buf)
            if wait is None:
                reply = conn.roundtrip(buf.take(), 2, deadline)[1]
            else:
                buf.append_command(wait)
                _, reply, acked = conn.roundtrip(buf.take(), 3, deadline)
                reply = durable_reply(reply, acked, self.replicas)
            loaded: object = None
            if script is not None and type(reply) is ReplyError and reply.code == "NOSCRIPT":
                load = _script_load(conn, script)
                buf.append_command((b"ASKING",))
                append(buf)
                loaded, _, reply = conn.roundtrip(load + buf.take(), 3, deadline)
        except NotSent as late:  # nothing was written (or only what NOSCRIPT refused): nothing ran
            pool.put(conn)
            raise late.cause from None
        except BaseException as exc:
            pool.discard(conn)
            raise Unconfirmed(exc) from None
        pool.put(conn)
        if script is not None:
            check_loaded([loaded], script)
        return reply

    def script_one(self, script: _scripts.Script, key: bytes, token: bytes, ttl_ms: int | None,
                   deadline: float | None = None) -> object:
        """EVALSHA of a single-key script; on NOSCRIPT, SCRIPT LOAD and the retry go out together.
        EXTEND goes as ``SET ... IFEQ`` where the connection's server offers it (``_wire.set_ifeq``).

        A transport failure after the command was written raises ``Unconfirmed``; errors raised
        before anything was sent (no connection) and refusals (SCRIPT LOAD denied) propagate.
        """
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        pool = self.pool
        conn = pool.get(deadline)
        buf = conn.buffer
        # Only EXTEND ever goes as SET IFEQ: a release (the hot path) reads one flag, calls nothing.
        as_set = conn.set_ifeq and script is _scripts.EXTEND and ttl_ms is not None
        if as_set:
            set_ifeq.append(buf, key, token, ttl_ms)  # type: ignore[arg-type]
        else:
            script.append(buf, key, token, ttl_ms)
        try:
            reply = conn.request(buf.take(), deadline)
            loaded: object = None
            if as_set:
                reply = set_ifeq.as_script_reply(reply)
            elif type(reply) is ReplyError and reply.code == "NOSCRIPT":
                load = _script_load(conn, script)
                script.append(buf, key, token, ttl_ms)
                loaded, reply = conn.roundtrip(load + buf.take(), 2, deadline)
        except NotSent as late:  # nothing was written: nothing ran
            pool.put(conn)
            raise late.cause from None
        except BaseException as exc:
            pool.discard(conn)
            raise Unconfirmed(exc) from None
        pool.put(conn)
        check_loaded([loaded], script)
        return reply

    def many(self, count: int, encode: Encoder, script: _scripts.Script | None = None,
             reencode: Reencoder | None = None, on_replies: ReplyHandler | None = None,
             deadline: float = math.inf, orphans: OrphanTags | None = None, keys: Any = None,
             durable: bool = False, shape: ReplyShape | None = None, read_only: bool = False) -> list[object]:
        """Replies for ``count`` items in input order; an item whose outcome the connection lost
        is ``UNKNOWN`` and one never sent is ``NOT_SENT``. Error replies stay in the list.
        ``read_only`` (queries: nothing to settle): a reply the timeout cut raises its
        ``TimeoutError`` instead.
        ``durable`` (acquires): with ``replicas_ack``, ``WAIT`` follows on the same connection and
        every lock taken becomes ``NOT_DURABLE`` when too few replicas acknowledged it.

        For scripts, items answered NOSCRIPT are sent again after loading the script, encoded by
        ``reencode(buf, indices)``. ``on_replies(start, replies)`` also sees each chunk as it
        arrives (not the NOSCRIPT retries), to overlap the caller's work with the server's.
        Nothing waits past ``deadline`` (besides each chunk's own timeout); one that passed before
        anything was written raises ``UnsentTimeoutError``. A call interrupted
        (KeyboardInterrupt, SystemExit) hands what its acquires may have taken to ``on_orphan``,
        tagged by ``orphans(start, stop)``: the chunks in flight, the one being handed over, a
        NOSCRIPT retry's. ``keys`` (each item's key, for a Redis Cluster's executor to route by)
        is ignored here. ``shape``: items that answer several replies each (transactions), one
        reply per item all the same.
        """
        results: list[object] = [NOT_SENT] * count
        if not count:
            return results
        wait = durable_wait(self.wait, durable, script)
        pool = self.pool
        began = time.monotonic()
        conn = pool.get(min(began + self.timeout, deadline))

        def store(start: int, replies: list[object]) -> None:
            results[start:start + len(replies)] = replies
            if on_replies is not None:
                on_replies(start, replies)

        try:
            tail = run_chunks(conn, count, self.chunk_size, encode, self.timeout, store, deadline=deadline,
                              current=partial(pool.current, conn), shape=shape,
                              epilogue=b"" if wait is None else _encoded(conn, wait),
                              epilogue_replies=0 if wait is None else 1, since=began)
            if script is not None and reencode is not None:
                # Within the call's budget (a timeout a chunk), not a new one: a floor to send it in.
                ends = began + bulk_budget(self.timeout, count, self.chunk_size)
                self._reload_and_retry(conn, script, reencode, results,
                                       floored(ends, RELOAD_FLOOR, deadline), orphans)
        except PipelineBroken as broken:
            if broken.sent == 0 and isinstance(broken.cause, NotSent):  # late before the first write
                pool.put(conn)
                raise broken.cause.cause from None  # as asyncio's executor: nothing was sent
            pool.discard(conn)
            if read_only and isinstance(broken.cause, TimeoutError):
                raise broken.cause from None
            _mark_unknown(results, range(broken.replied, broken.sent))
            interrupted = not isinstance(broken.cause, Exception)
            if interrupted:  # before NOT_DURABLE hides which replies took their lock
                self._orphan(orphans, broken, results, on_replies is not None)
            if wait is not None:
                mark_not_durable(results, None, self.replicas)
            if interrupted:
                raise broken.cause from None
            return results
        except BaseException:
            pool.discard(conn)
            raise
        pool.put(conn)
        if wait is not None:  # no WAIT reply: the items were cut short by a failover, nothing tells
            mark_not_durable(results, tail[0] if tail else None, self.replicas)
        return results

    def _orphan(self, orphans: OrphanTags | None, broken: PipelineBroken, results: list[object],
                handed: bool) -> None:
        """An interrupted call's locks nobody will settle go to ``on_orphan``: the chunks already
        answered when no ``on_replies`` took them (``handed`` False), the chunk being handed over,
        with their replies, and the chunks in flight as ``UNKNOWN``."""
        on_orphan = self.on_orphan
        if orphans is None or on_orphan is None:
            return
        answered = broken.replied
        if broken.handing is not None:
            start, replies = broken.handing
            if not handed and start:
                hand_over(on_orphan, orphans, 0, results[:start])
            hand_over(on_orphan, orphans, start, replies)
            answered = max(answered, start + len(replies))
        elif not handed and answered:
            hand_over(on_orphan, orphans, 0, results[:answered])
        if broken.sent > answered:
            on_orphan(orphans(answered, broken.sent), UNKNOWN)

    def _reload_and_retry(self, conn: Connection, script: _scripts.Script, reencode: Reencoder,
                          results: list[object], deadline: float, orphans: OrphanTags | None = None) -> None:
        missing = noscript_indices(results)
        if not missing:
            return
        sub_results: list[object] = [NOT_SENT] * len(missing)

        def encode(buf: Any, start: int, stop: int) -> None:
            reencode(buf, missing[start:stop])

        def store(start: int, replies: list[object]) -> None:
            sub_results[start:start + len(replies)] = replies

        try:
            head = run_chunks(conn, len(missing), self.chunk_size, encode, self.timeout, store,
                              prologue=_script_load(conn, script), prologue_replies=1, deadline=deadline)
        except PipelineBroken as broken:
            _mark_unknown(sub_results, range(broken.replied, broken.sent))
            if not isinstance(broken.cause, Exception) and orphans is not None and self.on_orphan is not None:
                # The caller's plan sees the retry's replies only when ``many`` returns: every
                # item sent again is orphaned, with its reply or as unknown.
                if broken.sent:
                    hand_over(self.on_orphan, subset_orphans(orphans, missing), 0, sub_results[:broken.sent])
            for j, i in enumerate(missing):
                results[i] = sub_results[j]
            # Marked here by the retry's own positions: the caller must not mark again by them.
            # Every first-pass reply is in ``results``: the caller hands them over when no
            # on_replies took them (the retried ones again: harmless), and marks nothing more.
            raise PipelineBroken(broken.cause, len(results), len(results)) from None
        check_loaded(head, script)
        for j, i in enumerate(missing):
            results[i] = sub_results[j]


def settle_all(on_replies: ReplyHandler | None, results: list[object], orphans: OrphanTags | None,
               on_orphan: OrphanHandler | None) -> None:
    """Hand every reply of a call to ``on_replies`` at once (a Redis Cluster's or a Sentinel's
    executor); interrupted on the way (a lease at a time), the replies go to ``on_orphan``."""
    if on_replies is None or not results:
        return
    try:
        on_replies(0, results)
    except BaseException as exc:
        if not isinstance(exc, Exception) and orphans is not None and on_orphan is not None:
            hand_over(on_orphan, orphans, 0, results)
        raise


def _mark_unknown(results: list[object], indices: range) -> None:
    for i in indices:
        results[i] = UNKNOWN
