"""One batch of commands sent to every Redlock master at once, for asyncio: what the threaded
fan-out (``_redlock.fanout``) does, on each master's pipelining connection.

A batch is encoded once (every master gets the same bytes: the same keys, tokens and ttl) and
written to every master in the same loop iteration; then one wait covers every master's
replies, so stuck masters cost one timeout together. A master that does not answer in time is
left out of the rest of the call and its replies are marked ``UNKNOWN``; its connection stays
(the late replies are read and dropped) unless the protocol's own deadline breaks it. A caller
cancelled mid-call abandons its futures the same way; what its commands may have taken is the
flow's to release.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from turbolock._aio.protocol import RedisProtocol
from turbolock._aio.waiting import run_within
from turbolock._flows.redlock_result import describe_failure
from turbolock._flows.steps import Outcome
from turbolock._wire.outcomes import (
    FANOUT_WINDOW,
    NOT_SENT,
    RELOAD_FLOOR,
    UNKNOWN,
    Encoder,
    NotSent,
    Reencoder,
    bulk_budget,
    settle_reloaded,
)
from turbolock._wire.scripts import Script
from turbolock.errors import ReplyError

ChunkHandler = Callable[[int, int, float, list[list[object]]], None]


def _noscript(reply: object) -> bool:
    return type(reply) is ReplyError and reply.code == "NOSCRIPT"


Opening = dict[int, "asyncio.Future[RedisProtocol]"]
Joined = Callable[[int, RedisProtocol], None]
Answered = Callable[[dict[int, "asyncio.Future[Any]"]], None]


def _start_connections(masters: Sequence[Any], targets: Sequence[int]) -> tuple[list[RedisProtocol | None],
                                                                                 Opening]:
    """Each target master's open connection, and the connects started for those without one."""
    conns: list[RedisProtocol | None] = [None] * len(masters)
    opening: Opening = {}
    unready = []
    for m in targets:
        conn = masters[m]._pool.ready()
        if conn is not None:
            conns[m] = conn
        else:
            unready.append(m)
    for m in unready:  # moved to the running loop first (a new loop's first connects are cold ones:
        masters[m]._pool.adopt_running_loop()  # see _wait), or refused before any connect starts
    for m in unready:
        opening[m] = asyncio.ensure_future(masters[m]._pool.connect())
    return conns, opening


async def _wait(masters: Sequence[Any], opening: Opening, futs: dict[int, asyncio.Future[Any]],
                timeout: float, joined: Joined, errors: list[str | None], until: float | None = None,
                answered: Answered | None = None) -> None:
    """Wait for ``futs`` and for the connections being opened, together, for ``timeout``: a
    master whose connection opens in time is handed to ``joined`` (which sends it what the others
    got, adding to ``futs``) and has ``timeout`` from then to answer. Masters that cannot be
    reached and masters that do not answer cost one timeout together. ``answered`` sees ``futs``
    after every wake-up, and may replace a finished one by one to wait for within the same time."""
    deadline = time.monotonic() + timeout
    # A cold client (too few masters connected to decide anything) gives the first connections
    # it opens their own connect timeout, no later than ``until`` (a blocking acquire's wait): a
    # first call must not fail for the time a connect takes. Once: not a connection opened
    # again, nor a first one whose grace a call already gave (a master that dropped it, or
    # never answered: paused, partitioned, would cost every call a connect timeout).
    need = len(masters) // 2 + 1
    first = [m for m in opening if not masters[m]._pool.first_connect_over]
    cold_deadline = time.monotonic() + max((masters[m].options.connect_timeout for m in first), default=0.0)
    if until is not None:
        cold_deadline = min(cold_deadline, until)
    try:
        while True:
            waiting = [*opening.values(), *(fut for fut in futs.values() if not fut.done())]
            cold = any(m in opening for m in first) and len(futs) < need
            left = (max(deadline, cold_deadline) if cold else deadline) - time.monotonic()
            if not waiting or left <= 0:
                break
            await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            for m, task in list(opening.items()):
                if not task.done():
                    continue
                del opening[m]
                error = task.exception()
                if error is None:
                    joined(m, task.result())
                    if m in first:  # a cold client's first connection: a node timeout to answer
                        extended = time.monotonic() + timeout
                        deadline = max(deadline, extended if until is None else min(extended, until))
                else:
                    errors[m] = describe_failure(error)
                    if m in first:  # its grace given: the next calls wait a node timeout for it
                        masters[m]._pool.first_connect_over = True
            if answered is not None:
                answered(futs)
    except BaseException:
        _abandon([*opening.values(), *futs.values()])
        raise
    for m, task in opening.items():
        task.cancel()  # the pool's own connect goes on (shielded) for the next call
        errors[m] = f"{masters[m].options.address}: no connection in time"
        if m in first:  # its grace is spent: the next calls wait a node timeout for it, no more
            masters[m]._pool.first_connect_over = True
    opening.clear()


def _abandon(futs: Sequence[asyncio.Future[Any] | None]) -> None:
    for fut in futs:
        if fut is not None and not fut.done():
            fut.cancel()  # the protocol reads the reply when it comes and drops it


def _settled(fut: asyncio.Future[Any]) -> tuple[Any, BaseException | None]:
    """A finished future's (result, None), or (None, its error); NotSent stays NotSent."""
    if fut.cancelled():
        return None, asyncio.CancelledError()
    error = fut.exception()
    return (fut.result(), None) if error is None else (None, error)


def _collect(masters: Sequence[Any], futs: dict[int, asyncio.Future[Any]], timeout: float,
             replies: list[object], errors: list[str | None]) -> None:
    """Every master's reply into ``replies[m]``, or ``UNKNOWN`` and the reason into ``errors[m]``
    (a future still waiting is abandoned); one never sent leaves ``replies[m]`` alone."""
    for m, fut in futs.items():
        if not fut.done():
            fut.cancel()
            replies[m] = UNKNOWN
            errors[m] = f"{masters[m].options.address} did not answer within {timeout * 1000:g} ms"
            continue
        reply, error = _settled(fut)
        if isinstance(error, NotSent):
            errors[m] = describe_failure(error.cause)
        elif error is not None:
            replies[m] = UNKNOWN
            errors[m] = describe_failure(error)
        else:
            replies[m] = reply


def _submit(conns: list[RedisProtocol | None], targets: Sequence[int], data: bytes, count: int,
            errors: list[str | None]) -> dict[int, asyncio.Future[Any]]:
    futs: dict[int, asyncio.Future[Any]] = {}
    for m in targets:
        conn = conns[m]
        if conn is None:
            continue
        try:
            futs[m] = conn.submit_encoded(data, count)
        except NotSent as exc:
            errors[m] = describe_failure(exc.cause)
    return futs


async def fan_out_one(masters: Sequence[Any], buffer: Any, encode: Callable[[Any], None], timeout: float,
                      script: Script | None = None, only: Sequence[int] | None = None,
                      until: float | None = None) -> tuple[list[object], list[str | None]]:
    """One command to every master (or those in ``only``); each master's reply (``UNKNOWN`` or
    ``NOT_SENT`` where there is none) and why a master failed. ``until``: the caller's deadline
    (a blocking acquire's), which a first connection's grace does not pass."""
    count = len(masters)
    replies: list[object] = [NOT_SENT] * count
    errors: list[str | None] = [None] * count
    targets = range(count) if only is None else only
    encode(buffer)
    data: bytes = buffer.take()
    conns, opening = _start_connections(masters, targets)
    futs = _submit(conns, targets, data, 1, errors)

    def joined(m: int, conn: RedisProtocol) -> None:
        conns[m] = conn
        futs.update(_submit(conns, (m,), data, 1, errors))

    retried: list[int] = []
    again = b""

    def reload(futs: dict[int, asyncio.Future[Any]]) -> None:
        """A master that forgot the script (a restart, SCRIPT FLUSH) is sent SCRIPT LOAD and the
        command again as soon as its NOSCRIPT reply is in, answered within the same wait."""
        nonlocal again
        for m, fut in list(futs.items()):
            if m in retried or not fut.done() or not _noscript(_settled(fut)[0]):
                continue
            retried.append(m)
            if not again:
                assert script is not None
                buffer.append_command((b"SCRIPT", b"LOAD", script.source))
                encode(buffer)
                again = buffer.take()
            futs.update(_submit(conns, (m,), again, 2, errors))  # not sent: the NOSCRIPT reply stays

    await _wait(masters, opening, futs, timeout, joined, errors, until, None if script is None else reload)
    _collect(masters, futs, timeout, replies, errors)
    for m in retried:
        got = replies[m]
        if type(got) is list:
            loaded, reply = got
            replies[m] = loaded if type(loaded) is ReplyError else reply
    return replies, errors


async def fan_out(masters: Sequence[Any], buffer: Any, count: int, encode: Encoder, timeout: float,
                  chunk_size: int, script: Script | None = None, reencode: Reencoder | None = None,
                  on_chunk: ChunkHandler | None = None, only: Sequence[int] | None = None) -> Outcome:
    """Items 0..count-1 to every master (or those in ``only``) in chunks, ``FANOUT_WINDOW``
    chunks in flight, each encoded once; every chunk's replies from all masters awaited within
    one ``timeout``. A master that fails is left out of the rest of the call. With ``script``,
    items answered NOSCRIPT are sent again after SCRIPT LOAD on that master, every master at
    once, within what is left of the call's budget (a ``timeout`` a chunk)."""
    ends = time.monotonic() + bulk_budget(timeout, count, chunk_size)
    n = len(masters)
    replies: list[list[object]] = [[NOT_SENT] * count for _ in range(n)]
    errors: list[str | None] = [None] * n
    started: list[float] = []
    if not count:
        return Outcome(replies, errors, started)
    targets = range(n) if only is None else only
    conns, opening = _start_connections(masters, targets)
    live = list(targets)
    reached = False  # whether any master was sent anything
    inflight: deque[tuple[int, int, dict[int, asyncio.Future[Any]], bytes]] = deque()

    def joined(m: int, conn: RedisProtocol) -> None:
        """A master connected while the first chunks were in flight: it gets them too."""
        conns[m] = conn
        nonlocal reached
        for start, stop, futs, data in inflight:
            try:
                futs[m] = conn.submit_encoded(data, stop - start)
                reached = True
            except NotSent as exc:
                fail(m, describe_failure(exc.cause))
                return

    def fail(m: int, reason: str) -> None:
        """Master ``m`` is out of this call: every chunk it was sent is UNKNOWN there."""
        conns[m] = None
        errors[m] = reason
        for start, stop, futs, _ in inflight:
            fut = futs.pop(m, None)
            if fut is not None:
                _abandon([fut])
                replies[m][start:stop] = [UNKNOWN] * (stop - start)

    next_start = 0
    try:
        while inflight or next_start < count:
            while len(inflight) < FANOUT_WINDOW and next_start < count:
                stop = min(count, next_start + chunk_size)
                started.append(time.monotonic())
                encode(buffer, next_start, stop)
                data: bytes = buffer.take()
                futs: dict[int, asyncio.Future[Any]] = {}
                inflight.append((next_start, stop, futs, data))
                for m in live:
                    conn = conns[m]
                    if conn is None:
                        continue
                    try:
                        futs[m] = conn.submit_encoded(data, stop - next_start)
                        reached = True
                    except NotSent as exc:
                        fail(m, describe_failure(exc.cause))
                next_start = stop
            start, stop, futs, _ = inflight[0]
            # One wait for every master's replies (and, with the first chunk, their connections).
            await _wait(masters, opening, futs, timeout, joined, errors)
            for m, fut in list(futs.items()):
                if not fut.done():
                    fail(m, f"{masters[m].options.address} did not answer within {timeout * 1000:g} ms")
                    continue
                got, error = _settled(fut)
                if error is not None:
                    fail(m, describe_failure(error.cause if isinstance(error, NotSent) else error))
                    if isinstance(error, NotSent):
                        replies[m][start:stop] = [NOT_SENT] * (stop - start)
                    continue
                replies[m][start:stop] = got if stop - start > 1 else [got]
            inflight.popleft()
            if on_chunk is not None:
                on_chunk(start, stop, started[start // chunk_size], [row[start:stop] for row in replies])
    except BaseException:
        for _, _, futs, _ in inflight:
            _abandon(list(futs.values()))
        raise
    if not reached:  # no master could be reached: nothing was sent
        started.clear()
    if script is not None and reencode is not None:
        reloads = [_reload_many(masters, conn, buffer, replies, errors, m, script, reencode, ends, chunk_size)
                   for m, conn in ((m, conns[m]) for m in live) if conn is not None]
        await asyncio.gather(*reloads)
    return Outcome(replies, errors, started)


async def _reload_many(masters: Sequence[Any], conn: RedisProtocol, buffer: Any, replies: list[list[object]],
                       errors: list[str | None], m: int, script: Script, reencode: Reencoder, ends: float,
                       chunk_size: int) -> None:
    """Master ``m``'s items answered NOSCRIPT, sent again after SCRIPT LOAD, answered by ``ends``
    (``RELOAD_FLOOR`` from the send at the least: a master that answers at once is not left out)."""
    row = replies[m]
    missing = [i for i, reply in enumerate(row) if _noscript(reply)]
    load = True
    for begin in range(0, len(missing), chunk_size):
        indices = missing[begin:begin + chunk_size]
        if load:
            buffer.append_command((b"SCRIPT", b"LOAD", script.source))
        reencode(buffer, indices)
        data: bytes = buffer.take()
        try:
            fut = conn.submit_encoded(data, len(indices) + load)
        except NotSent as exc:
            errors[m] = describe_failure(exc.cause)
            return  # the NOSCRIPT replies stay: those commands did not run
        try:
            finished, got = await run_within(fut, max(RELOAD_FLOOR, ends - time.monotonic()))
            if not finished:
                errors[m] = f"{masters[m].options.address} did not answer within the call's time"
                for i in indices:
                    row[i] = UNKNOWN
                return
        except Exception as exc:
            errors[m] = describe_failure(exc)
            for i in indices:
                row[i] = UNKNOWN
            return
        settle_reloaded(row, indices, got if isinstance(got, list) else [got], load)
        load = False
