"""One connection as an asyncio protocol: many tasks' commands leave in one write, replies are
matched to their futures in order.

Callers append commands to ``buffer`` (the core's ``CommandBuffer``) and call ``submit(n)`` for
a future of the next ``n`` replies. The write is deferred to the end of the loop iteration
(``loop.call_soon``), so every command issued by any task in that iteration leaves in one
``transport.write``; the core's ``RespParser`` turns whatever was read into replies, and they
resolve the futures in the order the commands went out.

A caller that stops waiting (its task was cancelled) cancels its future; the reply is still
consumed in its turn, so the connection stays usable. An acquire hands ``submit`` an *orphan*
tag: if its future was cancelled, ``on_orphan(tag, reply)`` is called when the reply comes (or
with ``UNKNOWN`` when the connection dies first) so a lock taken for nobody is released.

One timer per connection enforces the call deadline: commands share one timeout, so the
oldest one pending has the earliest deadline, and the timer only ever watches that one.
A deadline that passes breaks the connection, as in the blocking client: every command in
flight on it fails, and its outcome is unknown.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Callable
from typing import Any

from turbolock._flows.bulk_plan import OrphanHandler
from turbolock._flows.handshake import refused
from turbolock._wire.outcomes import UNKNOWN, DroppedConnectionError, NotSent
from turbolock._wire.ready import readable
from turbolock.errors import ClientClosedError, ConnectionError, ProtocolError, TimeoutError

# A write is made at once, without waiting for the end of the loop iteration, when this much is queued.
FLUSH_AT = 256 * 1024
# Timers may fire a hair early (the loop's clock resolution); a deadline this close counts as passed.
_DEADLINE_SLACK = 0.0005


_Entry = tuple["asyncio.Future[Any]", int, float, Any]
"""A pending request: its future, how many replies it takes, its deadline, its orphan tag."""


_COPIED = (ConnectionError, TimeoutError, ProtocolError, ClientClosedError, DroppedConnectionError)


def _fresh(error: BaseException) -> BaseException:
    # One exception object raised in many tasks would collect all their tracebacks.
    if type(error) in _COPIED:
        return type(error)(*error.args)
    return error


class RedisProtocol(asyncio.Protocol):
    __slots__ = ("loop", "buffer", "address", "timeout", "on_orphan", "on_close", "on_push", "error",
                 "idle_since", "_parser", "_pending", "_unsent", "_partial", "_flush_pending", "_timer",
                 "_transport", "set_ifeq", "_retiring")

    def __init__(self, loop: asyncio.AbstractEventLoop, core: Any, key_prefix: bytes, address: str,
                 timeout: float, on_orphan: OrphanHandler) -> None:
        self.loop = loop
        self.buffer: Any = core.CommandBuffer(key_prefix)
        self.address = address
        self.timeout = timeout
        self.on_orphan = on_orphan
        self.on_close: Callable[[RedisProtocol], None] | None = None
        self.on_push: Callable[[list[object]], None] | None = None
        """Set on a subscriber connection: every reply goes to it (none answers a request)."""
        self.error: BaseException | None = None
        self.idle_since = loop.time()  # when the last reply left nothing pending
        self.set_ifeq = False
        """Whether the server offers ``SET ... IFEQ`` (the handshake's HELLO says)."""
        self._parser: Any = core.RespParser()
        self._pending: deque[_Entry] = deque()
        self._unsent = 0  # entries at the tail of _pending whose bytes are still in the buffer
        self._partial: list[object] | None = None  # replies so far for a multi-reply head entry
        self._flush_pending = False
        self._timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None
        self._retiring: BaseException | None = None  # see ``retire``

    # -- asyncio callbacks ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport subclass

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        try:
            parser.feed(data)
            replies = parser.get_replies()
        except ProtocolError as exc:
            self.abort(exc)
            return
        pending = self._pending
        if self.on_push is not None and not pending:
            if replies:
                self.on_push(replies)
            return
        partial = self._partial
        on_orphan = self.on_orphan
        i = 0
        n = len(replies)
        while i < n:
            if len(pending) <= self._unsent:
                # Before anything was written: Redis refusing the connection (maxclients) says so
                # at once, before it reads the handshake.
                self.abort(refused(self.address, replies[i])
                           or ProtocolError(f"{self.address} sent a reply nobody asked for"))
                return
            fut, count, _, orphan = pending[0]
            if count == 1 and partial is None:
                reply = replies[i]
                i += 1
            else:
                if partial is None:
                    partial = []
                take = count - len(partial)
                partial += replies[i:i + take]
                i += take
                if len(partial) < count:
                    break
                reply, partial = partial, None
            pending.popleft()
            if fut.cancelled():
                if orphan is not None:
                    on_orphan(orphan, reply)
            else:
                fut.set_result(reply)
        self._partial = partial
        if not pending:
            self.idle_since = self.loop.time()
            if self._retiring is not None:
                # On the next turn: a caller resumed by these replies may send more first (a
                # bulk call's next chunk), which the server answers (READONLY, on a demoted master).
                self.loop.call_soon(self._close_if_idle)

    def eof_received(self) -> bool:
        self._set_error(ConnectionError(f"{self.address} closed the connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if exc is None:
            self._set_error(ConnectionError(f"{self.address} closed the connection"))
        elif isinstance(exc, OSError):
            self._set_error(ConnectionError(f"connection to {self.address} failed: {exc.strerror or exc}"))
        else:
            self._set_error(ConnectionError(f"connection to {self.address} failed: {exc}"))
        self._fail_pending()

    # -- requests -------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self.error is None and self._transport is not None

    def is_stale(self) -> bool:
        """True when an idle connection has something to read: the server closed it (a restart
        while the loop was busy elsewhere) or sent junk. One zero-timeout ``select``."""
        transport = self._transport
        sock = None if transport is None else transport.get_extra_info("socket")
        if sock is None:
            return self._transport is None
        try:
            return bool(readable((sock.fileno(),), 0))
        except (OSError, ValueError):
            return True

    @property
    def pending(self) -> int:
        """Requests sent or queued that still wait for replies."""
        return len(self._pending)

    def submit(self, count: int = 1, orphan: Any = None, since: float | None = None) -> asyncio.Future[Any]:
        """A future of the replies to the ``count`` commands just appended to ``buffer``: the reply
        itself for one, a list for more. It fails with ``NotSent`` when the connection broke before
        the commands were written, with the error itself when it broke after. The reply is due
        ``timeout`` after now, or after ``since`` (loop time: a call that waited for this
        connection to open counts its deadline from its start)."""
        if self.error is not None or self._transport is None or self._retiring is not None:
            self.buffer.clear()
            raise NotSent(self._refusal())
        loop = self.loop
        fut = loop.create_future()
        deadline = (loop.time() if since is None else since) + self.timeout
        self._pending.append((fut, count, deadline, orphan))
        self._unsent += 1
        if not self._flush_pending:
            self._flush_pending = True
            loop.call_soon(self._flush_soon)
        timer = self._timer
        if timer is None:
            self._timer = loop.call_at(deadline, self._check_deadline)
        elif since is not None and deadline < timer.when():  # due before those queued ahead of it
            timer.cancel()
            self._timer = loop.call_at(deadline, self._check_deadline)
        if len(self.buffer) >= FLUSH_AT:
            self.flush()
        return fut

    def submit_encoded(self, data: bytes, count: int, orphan: Any = None) -> asyncio.Future[Any]:
        """``submit`` for ``count`` commands encoded elsewhere (one batch written to several
        servers): written now, behind whatever this connection has queued."""
        if self.error is not None or self._transport is None or self._retiring is not None:
            raise NotSent(self._refusal())
        self.flush()
        loop = self.loop
        fut = loop.create_future()
        deadline = loop.time() + self.timeout
        self._pending.append((fut, count, deadline, orphan))
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._check_deadline)
        self._transport.write(data)
        return fut

    def _refusal(self) -> BaseException:
        """Why nothing more is written here."""
        error = self.error or self._retiring
        return _fresh(error or ConnectionError(f"connection to {self.address} is closed"))

    def write_now(self) -> None:
        """Write what ``buffer`` holds, expecting no reply in turn (a subscriber's commands)."""
        if self._transport is not None and self.error is None:
            self._transport.write(self.buffer.take())
        else:
            self.buffer.clear()

    def _flush_soon(self) -> None:
        self._flush_pending = False
        if self._unsent:
            self.flush()

    def flush(self) -> None:
        """Write everything queued now."""
        transport = self._transport
        if transport is None or not self._unsent:
            return
        data = self.buffer.take()
        self._unsent = 0
        transport.write(data)

    def _check_deadline(self) -> None:
        self._timer = None
        pending = self._pending
        if not pending or self.error is not None:
            return
        deadline = min(entry[2] for entry in pending)  # in order of writing, mostly of deadline too
        if self.loop.time() + _DEADLINE_SLACK >= deadline:
            self.abort(TimeoutError(f"{self.address} did not answer within the call's deadline"))
        else:
            self._timer = self.loop.call_at(deadline, self._check_deadline)

    # -- failure --------------------------------------------------------------------------------

    def _set_error(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error

    def abort(self, error: BaseException) -> None:
        """Break the connection: every request pending fails with ``error`` (or ``NotSent``)."""
        self._set_error(error)
        transport = self._transport
        if transport is not None:
            transport.abort()  # connection_lost follows on a later iteration; the requests fail now
        self._fail_pending()

    def _fail_pending(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        pending, self._pending = self._pending, deque()
        sent = len(pending) - self._unsent
        self._unsent = 0
        self._partial = None
        self.buffer.clear()
        error = self.error
        assert error is not None
        for index, (fut, _, _, orphan) in enumerate(pending):
            if fut.cancelled():
                if orphan is not None and index < sent:
                    self.on_orphan(orphan, UNKNOWN)
            elif not fut.done():
                fut.set_exception(_fresh(error) if index < sent else NotSent(_fresh(error)))
        if self.on_close is not None:
            on_close, self.on_close = self.on_close, None
            on_close(self)

    def forget(self, error: BaseException) -> None:
        """Drop a connection whose event loop is closed, without calling into that loop.

        The socket is shut down at once (the server sees the close; the descriptor goes with
        the transport). Requests pending are dropped unanswered: their waiters belong to the
        dead loop and can never run again. An acquire that was sent is handed to ``on_orphan``
        as ``UNKNOWN``, so the lock it may have taken is released.
        """
        self._set_error(error)
        self._timer = None  # cancelling would call into the dead loop
        self._flush_pending = False
        transport, self._transport = self._transport, None
        pending, self._pending = self._pending, deque()
        sent = len(pending) - self._unsent
        self._unsent = 0
        self._partial = None
        self.buffer.clear()
        self.on_close = None
        sock = None if transport is None else transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except (OSError, ValueError, TypeError):  # uvloop's stand-in refuses; it closed it with the loop
                pass
        for index, (_, _, _, orphan) in enumerate(pending):
            if orphan is not None and index < sent:
                self.on_orphan(orphan, UNKNOWN)

    def retire(self, error: BaseException) -> None:
        """Close the connection once no request is pending (with ``error``), at once if none is.
        Its server is no longer the one to use: requests not written yet fail with ``NotSent``,
        as do new ones, while those already written get their replies (a write a demoted master
        refused, sent again elsewhere) instead of becoming outcomes lost; one whose server does
        not answer fails at its deadline as always."""
        self._retiring = error
        pending = self._pending
        unsent = [pending.pop() for _ in range(self._unsent)]
        self._unsent = 0
        self.buffer.clear()
        for fut, _, _, _ in reversed(unsent):
            if not fut.done():  # a cancelled one was never sent: no lock of its own to release
                fut.set_exception(NotSent(_fresh(error)))
        if not pending:
            self.close(error)

    def _close_if_idle(self) -> None:
        if not self._pending and self._retiring is not None:
            self.close(self._retiring)

    def close(self, error: BaseException) -> None:
        """Close the connection; requests still pending fail with ``error``."""
        self._set_error(error)
        transport = self._transport
        if transport is not None:
            transport.close()
        self._fail_pending()

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"RedisProtocol({self.address}, {state}, pending={len(self._pending)})"
