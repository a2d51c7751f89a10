"""A few asyncio connections to one server, opened on demand and shared by every task.

One pipelining connection carries any number of tasks' commands, one write per loop iteration,
and is the default; more keep a bulk call from holding small calls up behind it, at the price
of one write per connection per iteration. Calls go round-robin over the open connections. A
connection that breaks (a server restart) is dropped at once, so the next call opens a new one.

Connections belong to the event loop they were opened in. Used from another loop (a second
``asyncio.run()``), the pool drops them and opens new ones there when their loop is closed or
idle; while their loop still runs (in another thread) it refuses with ``LockUsageError``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from threading import get_ident
from typing import Any

from turbolock._aio.connect import open_connection
from turbolock._aio.protocol import RedisProtocol
from turbolock._aio.waiting import finished_within
from turbolock._flows.bulk_plan import OrphanHandler
from turbolock._wire.outcomes import DroppedConnectionError
from turbolock.errors import ClientClosedError, ConnectionError, LockUsageError, UnsentTimeoutError
from turbolock.options import ConnectionOptions

# A connection idle longer than this is checked for a close by the server before use (as the
# blocking pool does): the loop normally sees the close at once, but not while it was blocked.
STALE_CHECK_AFTER = 0.001


def cancelling() -> bool:
    """Whether the running task is being cancelled (unknown before Python 3.11: taken as not)."""
    current = asyncio.current_task()
    count = getattr(current, "cancelling", None)
    return bool(count()) if count is not None else False


SERVED_IDLE_TURNS = 3
"""Loop turns ``close()`` lets pass with nothing in flight before it closes: a caller woken by
its reply, or by the connection it waited for, sends its next command a turn or two later."""
ORPHAN_POLL = 0.001
"""close()'s look at the replies cancelled acquires still await (their futures are done)."""


def deadline_passed(address: str) -> UnsentTimeoutError:
    """A call's deadline passed before anything was sent to ``address`` (waiting for, or opening,
    a connection)."""
    return UnsentTimeoutError(f"the call's deadline passed before anything was sent to {address}")


class ConnectionPool:
    __slots__ = ("options", "core", "key_prefix", "size", "on_orphan", "_open", "_next", "_connecting",
                 "_closed", "_shut", "_loop", "_thread", "set_ifeq", "_parents", "_retired",
                 "first_connect_over", "on_new_loop")

    def __init__(self, options: ConnectionOptions, core: Any, key_prefix: bytes, size: int,
                 on_orphan: OrphanHandler) -> None:
        self.options = options
        self.core = core
        self.key_prefix = key_prefix
        self.size = size
        self.on_orphan = on_orphan
        self._open: list[RedisProtocol] = []
        self._retired: list[RedisProtocol] = []
        """Connections ``drop_all`` took out of use, closing once their calls in flight are answered."""
        self._next = 0
        self._connecting: asyncio.Task[RedisProtocol] | None = None
        self._closed = False
        """No call is let in (``close()`` began); those under way are still served."""
        self._shut = False
        """Nothing is served any more: every connection closed."""
        self._loop: asyncio.AbstractEventLoop | None = None  # where the connections were opened
        self._thread = 0  # the thread that loop runs in
        self.set_ifeq = False
        """Whether the server offers ``SET ... IFEQ``, as the newest connection's handshake said."""
        self.first_connect_over = False
        """Whether a connection was ever opened, or a Redlock call already gave the first one its
        connect timeout: a Redlock fan-out gives that grace once (see ``_aio.fanout._wait``)."""
        self._parents: list[Any] = []
        """In a forked child: the parent's connections, kept from the garbage collector (see
        ``forget_after_fork``)."""
        self.on_new_loop: Callable[[], None] | None = None
        """Called once the pool moved to the running loop from another one (the client's other
        loop-bound parts follow it)."""

    @property
    def server(self) -> str:
        """Who this pool's connections go to, for messages (a Sentinel's pool names its master)."""
        return self.options.address

    def ready(self) -> RedisProtocol | None:
        """An open connection when the pool is full, else None (then ``await connect()``).

        The fast path: no coroutine, no await.
        """
        conns = self._open
        if len(conns) < self.size:
            return None
        index = self._next + 1
        if index >= len(conns):
            index = 0
        self._next = index
        conn = conns[index]
        loop = conn.loop
        # "Is conn.loop the loop running here?", asked without asyncio's _get_running_loop(), which
        # costs a getpid() system call before Python 3.12: a loop runs in this thread exactly then.
        if get_ident() != self._thread or not loop.is_running():
            return None  # another loop's connection: connect() moves the pool or refuses
        # The deque itself, not the ``pending`` property: a method call less per command.
        if conn._pending or loop.time() - conn.idle_since < STALE_CHECK_AFTER or not conn.is_stale():
            return conn
        conn.abort(ConnectionError(f"{self.server} closed the connection"))  # dropped from _open
        return None

    async def connect(self, until: float | None = None) -> RedisProtocol:
        """Open one more connection (one at a time; concurrent callers share it). While one is
        being opened, callers are served by an open one if there is any. ``until`` (loop time):
        the caller's deadline, past which it waits for no connect (``UnsentTimeoutError``), and
        before which it opens one itself when the one it shared failed (that one ended by
        another call's deadline)."""
        while True:
            if self._closed:
                raise ClientClosedError()
            self.adopt_running_loop()
            task = self._connecting
            if task is not None and task.done():  # ended, its ``_connected`` not run yet: not shared
                task = self._connecting = None
            shared = task is not None
            if task is None:
                if len(self._open) >= self.size:
                    return self._open[0]
                task = asyncio.get_running_loop().create_task(self._connect_one(until))
                self._connecting = task
                task.add_done_callback(self._connected)
            elif self._open:
                return self._open[self._next % len(self._open)]
            try:
                if until is None:
                    # Shielded: a caller cancelled while waiting must not cancel the connect others wait on.
                    return await asyncio.shield(task)
                if not await finished_within(task, until - task.get_loop().time()):  # never cancels it
                    raise deadline_passed(self.server)
                return task.result()
            except asyncio.CancelledError:
                if self._closed and task.cancelled() and not cancelling():
                    raise ClientClosedError() from None  # close() cancelled the connect, not the caller
                raise
            except UnsentTimeoutError:
                raise
            except Exception:
                if self._open and not self._closed:  # one more connection could not be opened: make do
                    return self._open[0]
                if shared and until is not None and task.get_loop().time() < until and not self._closed:
                    continue
                raise

    async def connect_since(self, deadline: float | None = None) -> tuple[RedisProtocol, float]:
        """``connect()``, and the loop time the caller began waiting: its call's deadline counts
        from there (``RedisProtocol.submit``), so opening the connection is part of it; or from
        ``deadline`` (monotonic) when that comes first (a call that spent time elsewhere).
        ``UnsentTimeoutError`` when the whole of it went on opening the connection."""
        loop = asyncio.get_running_loop()
        since = loop.time()
        until = since + self.options.timeout
        if deadline is not None:
            until = min(until, since + deadline - time.monotonic())
        conn = await self.connect(until)
        if loop.time() >= until:
            raise deadline_passed(self.server)
        return conn, since

    async def _connect_one(self, until: float | None = None) -> RedisProtocol:
        conn = await self._open_connection(until)
        if conn.loop is not self._loop:  # opened for a loop the pool has since left
            conn.close(ConnectionError("the event loop this connection was opened in is gone"))
            raise ConnectionError("the event loop this connection was opened in is gone")
        if self._shut:
            conn.close(ClientClosedError())
            raise ClientClosedError()
        conn.on_close = self._dropped
        # Opened for calls let in before close() began: theirs, but no new call's.
        (self._retired if self._closed else self._open).append(conn)
        self.set_ifeq = conn.set_ifeq
        self.first_connect_over = True
        return conn

    async def open_unpooled(self) -> RedisProtocol:
        """A new connection that is never handed out (a subscriber's), where this pool's go."""
        return await self._open_connection()

    async def _open_connection(self, until: float | None = None) -> RedisProtocol:
        """A new connection; ``until``: the loop time its first caller waits until, if any."""
        return await open_connection(self.options, self.core, self.key_prefix, self.on_orphan)

    def drop_all(self) -> None:
        """Stop using every connection (the server they go to is no longer the one to use): the
        next call opens a new one, and each old one closes once the calls in flight on it have
        their replies (as the blocking pool's busy connections do when they come back)."""
        conns, self._open = self._open, []
        self._next = 0
        self._retired += conns
        why = f"{self.server}: the connection was dropped (a failover)"
        for conn in conns:
            conn.retire(DroppedConnectionError(why))

    def adopt_running_loop(self) -> None:
        """Make the running loop the pool's: another loop's connections are dropped if that loop
        is closed or idle; while it runs (in another thread) this raises ``LockUsageError``."""
        loop = asyncio.get_running_loop()
        old = self._loop
        if old is loop:
            self._thread = get_ident()  # a loop may be run in another thread once it stopped
            return
        if old is not None:
            if old.is_running():
                raise LockUsageError(
                    "this client belongs to another event loop, which is still running (in another "
                    "thread); use one client per event loop")
            self._leave(old)
        self._loop = loop
        self._thread = get_ident()
        if old is not None and self.on_new_loop is not None:
            self.on_new_loop()

    def _leave(self, old: asyncio.AbstractEventLoop) -> None:
        """Drop every connection and the connect in progress of ``old``, a loop that is not running."""
        task, self._connecting = self._connecting, None
        conns = self._take_all()
        self.first_connect_over = False  # the new loop's first connect gets its grace again
        error = ConnectionError("the event loop this connection was opened in is gone")
        if old.is_closed():
            for conn in conns:
                conn.forget(error)  # the dead loop cannot run callbacks, nor be asked to
            return
        # Idle but alive: close through it, so its tasks still waiting get the error if it runs again.
        if task is not None:
            task.cancel()
        for conn in conns:
            conn.on_close = None
            conn.abort(error)

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's connections and event loop are not this process's.
        Nothing of theirs is touched (closing one through the inherited loop would unregister the
        parent's socket from the epoll instance both processes share, shutting it down would
        close the parent's connection): they are set aside, and the next call opens new ones."""
        self._parents.append((self._open, self._retired, self._connecting, self._loop))
        self._open, self._retired, self._next, self._connecting = [], [], 0, None
        self._loop, self._thread = None, 0
        self.first_connect_over = False  # no connection here yet: the first connect's grace again

    def _connected(self, task: asyncio.Task[RedisProtocol]) -> None:
        if self._connecting is task:
            self._connecting = None
        if not task.cancelled():
            task.exception()  # retrieved here: every waiter gets it raised anyway

    def _dropped(self, conn: RedisProtocol) -> None:
        for conns in (self._open, self._retired):
            try:
                conns.remove(conn)
            except ValueError:
                pass

    def _take_all(self) -> list[RedisProtocol]:
        """Every connection, open or retired, no longer the pool's."""
        conns = self._open + self._retired
        self._open, self._retired, self._next = [], [], 0
        return conns

    @property
    def connections(self) -> list[RedisProtocol]:
        return list(self._open)

    async def close(self, deadline: float = -math.inf) -> None:
        """Close every connection. The calls in flight get their replies first, until
        ``deadline`` (monotonic: a release sent as its client closes is answered, not lost), as
        do the calls waiting for a connection being opened; what is left then fails with
        ``ClientClosedError``. No call is let in meanwhile."""
        self.adopt_running_loop()
        self.refuse()  # before the first await: a call made while close() runs is refused
        await self._stop_background()
        await self._served(deadline)
        task = self.abort()
        if task is not None:
            await asyncio.wait([task])  # whatever the connect ended with, it is over

    async def _stop_background(self) -> None:
        """What a pool runs beside its calls, ended as it closes (none here)."""

    def refuse(self) -> None:
        """Let no call in from now on: ``connect()`` refuses, and ``ready()`` finds no
        connection, so a new call goes there; the connections open serve the calls in flight
        until ``close()`` closes them."""
        self._closed = True
        self._retired += self._open
        self._open, self._next = [], 0

    async def orphans_answered(self, deadline: float) -> None:
        """Until no connection awaits the reply of an acquire cancelled after it was sent (its
        reply goes to ``on_orphan``: what it took is released by the client's cleanup), or
        ``deadline``. Open connections: close() waits here before its last cleanup."""
        while time.monotonic() < deadline and any(
                entry[3] is not None and entry[0].done()
                for conn in (*self._open, *self._retired) for entry in conn._pending):
            await asyncio.sleep(ORPHAN_POLL)

    async def _served(self, deadline: float) -> None:
        """Until every reply awaited on the pool's connections has come (and the connect under
        way has ended), or ``deadline``."""
        idle_turns = 0
        while (left := deadline - time.monotonic()) > 0:
            waits: list[asyncio.Future[Any]] = [entry[0] for conn in (*self._open, *self._retired)
                                                for entry in conn._pending if not entry[0].done()]
            connecting = self._connecting
            if connecting is not None and not connecting.done():
                waits.append(connecting)
            if waits:
                idle_turns = 0
                await asyncio.wait(waits, timeout=left)
            elif idle_turns >= SERVED_IDLE_TURNS:
                return
            else:  # the callers just answered, or given a connection, run: one may send a command
                idle_turns += 1
                await asyncio.sleep(0)

    def abort(self) -> asyncio.Task[RedisProtocol] | None:
        """Closed at once: every call from now on is refused, every connection closed, the
        connect under way cancelled (returned, for ``close`` to wait for)."""
        self._closed = self._shut = True
        task, self._connecting = self._connecting, None
        if task is not None:
            task.cancel()
        for conn in self._take_all():
            conn.on_close = None
            conn.close(ClientClosedError())
        return task
