"""A thread-safe pool of blocking connections, bounded, fork-aware and deadline-bound."""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from types import ModuleType

from turbolock._sync.connection import Connection
from turbolock.errors import ClientClosedError, UnsentTimeoutError
from turbolock.options import ConnectionOptions

# A connection idle longer than this is checked for a close by the server (a restart) before
# reuse. The check costs a select() call (~1.5 us), too much for back-to-back calls; a restart
# inside this window makes the call fail with ConnectionError, and the next one reconnects.
STALE_CHECK_AFTER = 0.001

_pools: weakref.WeakSet[ConnectionPool] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for pool in list(_pools):
        pool._forget_parent_connections()


os.register_at_fork(after_in_child=_after_fork_in_child)


class ConnectionPool:
    """Hands out idle connections (most recently used first) and opens new ones up to a limit.

    An idle connection the server closed (a restart) is noticed before use and replaced, so the
    next call after a restart works. After ``fork()`` the child drops the parent's sockets
    without touching them and opens its own.
    """

    def __init__(self, options: ConnectionOptions, core: ModuleType, key_prefix: bytes,
                 max_connections: int) -> None:
        self.options = options
        self.core = core
        self.key_prefix = key_prefix
        self.max_connections = max_connections
        self._idle: list[Connection] = []
        self._in_use = 0
        self._waiters = 0
        self._connecting = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._served = threading.Condition(self._lock)  # close() waits on it for those two to be 0
        self._generation = 0
        self._closed = False
        """No call is let in (``close()`` began); those already waiting are still served."""
        self._shut = False
        """Nothing is served any more: every connection is closed, or is when it comes back."""
        self.set_ifeq = False
        """Whether the server offers ``SET ... IFEQ``, as the newest connection's handshake said."""
        _pools.add(self)

    def _forget_parent_connections(self) -> None:
        # The parent still owns these sockets: close only our copies of the descriptors, and
        # let connections that were checked out at fork time be dropped when they come back.
        for conn in self._idle:
            conn.close()
        self._idle = []
        self._in_use = 0
        self._waiters = 0
        self._connecting = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._served = threading.Condition(self._lock)
        self._generation += 1

    def drop_all(self) -> None:
        """Close the idle connections, and the busy ones when they come back (the server they
        go to is no longer the one to use)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._in_use = 0
            self._generation += 1
            if self._waiters:
                self._cond.notify_all()
        for conn in idle:
            conn.close()

    def exhausted(self) -> bool:
        """Whether every connection is in use, or a thread waits for one (read without the lock:
        a hint, right again by the next connection given back)."""
        return bool(self._waiters) or self._in_use >= self.max_connections

    def current(self, conn: Connection) -> bool:
        """Whether ``conn`` still goes to the server to use (no ``drop_all`` since it was made)."""
        return conn.generation == self._generation

    def get(self, deadline: float, finish: bool = True) -> Connection:
        """An idle connection, or a new one (with ``finish=False``, its handshake sent but not
        yet read: see ``Connection.finish_connect``)."""
        conn: Connection | None = None
        with self._lock:
            if self._closed:
                raise ClientClosedError()
            if self._idle:
                conn = self._idle.pop()
                self._in_use += 1
            elif self._in_use < self.max_connections:
                self._in_use += 1
            else:
                conn = self._wait_for_idle(deadline)
            generation = self._generation  # the slot's: ``drop_all`` may start a new one meanwhile
        try:
            if conn is not None and time.monotonic() - conn.last_used > STALE_CHECK_AFTER and conn.is_stale():
                conn.close()
                conn = None
            if conn is None:
                conn = self._connect_counted(deadline, finish, generation)
        except BaseException:
            if generation == self._generation:  # else ``drop_all`` gave the slot back already
                self._release_slot()
            raise
        return conn

    def _connect_counted(self, deadline: float, finish: bool, generation: int) -> Connection:
        """``_new_connection``, counted while it runs: ``close()`` lets it finish (a Sentinel's
        pool asks the Sentinels meanwhile, whose connections close after)."""
        with self._lock:
            self._connecting += 1
        try:
            return self._new_connection(deadline, finish, generation)
        finally:
            with self._lock:
                self._connecting -= 1
                if not self._connecting and not self._waiters:
                    self._served.notify_all()

    def open_unpooled(self, deadline: float) -> Connection:
        """A new connection that is never handed out (a subscriber's), where this pool's go."""
        return self._new_connection(deadline, True, -1)

    def _new_connection(self, deadline: float, finish: bool, generation: int) -> Connection:
        conn = Connection(self.options, self.core, self.key_prefix)
        conn.generation = generation
        conn.connect(deadline, finish)
        if finish:
            self.set_ifeq = conn.set_ifeq
        return conn

    def _wait_for_idle(self, deadline: float) -> Connection | None:
        """With the lock held: wait until a connection is idle or a slot frees up."""
        self._waiters += 1
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise UnsentTimeoutError(f"all {self.max_connections} connections stayed busy too long")
                self._cond.wait(remaining)
                if self._shut:
                    raise ClientClosedError()
                if self._idle:
                    self._in_use += 1
                    return self._idle.pop()
                if self._in_use < self.max_connections:
                    self._in_use += 1
                    return None
        finally:
            self._waiters -= 1
            if not self._waiters and not self._connecting:
                self._served.notify_all()

    def put(self, conn: Connection) -> None:
        conn.last_used = time.monotonic()
        with self._lock:
            if conn.generation != self._generation:
                conn.close()
                return
            self._in_use -= 1
            if self._shut or conn.broken or conn.sock is None:
                conn.close()
            else:
                self._idle.append(conn)
            if self._waiters:
                self._cond.notify()

    def discard(self, conn: Connection) -> None:
        conn.close()
        if conn.generation == self._generation:
            self._release_slot()

    def _release_slot(self) -> None:
        with self._lock:
            self._in_use -= 1
            if self._waiters:
                self._cond.notify()

    def refuse(self) -> None:
        """Let no call in from now on (``close`` then serves those already in, and closes)."""
        with self._lock:
            self._closed = True

    def close(self, deadline: float = -math.inf) -> None:
        """Close every connection. No call is let in from now on, but those already waiting
        for a connection, or opening one, are served first, until ``deadline`` (a release queued
        behind busy connections as its client closes still goes out); calls in flight keep their
        connection, closed when it comes back."""
        with self._lock:
            self._closed = True
            while (self._waiters or self._connecting) and (remaining := deadline - time.monotonic()) > 0:
                self._served.wait(remaining)
            self._shut = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for conn in idle:
            conn.close()
