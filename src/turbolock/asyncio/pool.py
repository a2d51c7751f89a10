"""A few asyncio connections to one server, opened on demand and shared by every task.

One pipelining connection carries any number of tasks' commands, one write per loop iteration,
and is the default; more keep a bulk call from holding small calls up behind it, at the price
of one write per connection per iteration. Calls go round-robin over the open connections. A
connection that breaks (a server restart) is dropped at once, so the next call opens a new one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import ConnectionError
from ..options import ConnectionOptions
from .connect import open_connection
from .protocol import OrphanHandler, RedisProtocol

# A connection idle longer than this is checked for a close by the server before use (as the
# blocking pool does): the loop normally sees the close at once, but not while it was blocked.
STALE_CHECK_AFTER = 0.001


class ConnectionPool:
    __slots__ = ("options", "core", "key_prefix", "size", "on_orphan", "_open", "_next", "_connecting",
                 "_closed")

    def __init__(self, options: ConnectionOptions, core: Any, key_prefix: bytes, size: int,
                 on_orphan: OrphanHandler) -> None:
        self.options = options
        self.core = core
        self.key_prefix = key_prefix
        self.size = size
        self.on_orphan = on_orphan
        self._open: list[RedisProtocol] = []
        self._next = 0
        self._connecting: asyncio.Task[RedisProtocol] | None = None
        self._closed = False

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
        if conn.pending or conn.loop.time() - conn.idle_since < STALE_CHECK_AFTER or not conn.is_stale():
            return conn
        conn.abort(ConnectionError(f"{self.options.address} closed the connection"))  # dropped from _open
        return None

    async def connect(self) -> RedisProtocol:
        """Open one more connection (one at a time; concurrent callers share it). While one is
        being opened, callers are served by an open one if there is any."""
        if self._closed:
            raise ConnectionError("the client is closed")
        task = self._connecting
        if task is None:
            if len(self._open) >= self.size:
                return self._open[0]
            task = asyncio.get_running_loop().create_task(self._connect_one())
            self._connecting = task
            task.add_done_callback(self._connected)
        elif self._open:
            return self._open[self._next % len(self._open)]
        try:
            # Shielded: a caller cancelled while waiting must not cancel the connect others wait on.
            return await asyncio.shield(task)
        except Exception:
            if self._open and not self._closed:  # one more connection could not be opened: make do
                return self._open[0]
            raise

    async def _connect_one(self) -> RedisProtocol:
        conn = await open_connection(self.options, self.core, self.key_prefix, self.on_orphan)
        if self._closed:
            conn.close(ConnectionError("the client is closed"))
            raise ConnectionError("the client is closed")
        conn.on_close = self._dropped
        self._open.append(conn)
        return conn

    def _connected(self, task: asyncio.Task[RedisProtocol]) -> None:
        if self._connecting is task:
            self._connecting = None
        if not task.cancelled():
            task.exception()  # retrieved here: every waiter gets it raised anyway

    def _dropped(self, conn: RedisProtocol) -> None:
        try:
            self._open.remove(conn)
        except ValueError:
            pass

    @property
    def connections(self) -> list[RedisProtocol]:
        return list(self._open)

    async def close(self) -> None:
        self._closed = True
        task, self._connecting = self._connecting, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])  # whatever the connect ended with, it is over
        conns, self._open = self._open, []
        for conn in conns:
            conn.on_close = None
            conn.close(ConnectionError("the client is closed"))
