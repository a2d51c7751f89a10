"""A thread-safe pool of blocking connections, bounded, fork-aware and deadline-bound."""

from __future__ import annotations

import os
import threading
import time
from types import ModuleType

from ._connection import Connection
from .errors import ConnectionError, TimeoutError
from .options import ConnectionOptions


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
        self._cond = threading.Condition(threading.Lock())
        self._pid = os.getpid()
        self._closed = False

    def _after_fork(self) -> None:
        # The parent still owns these sockets: close only our copies of the descriptors.
        for conn in self._idle:
            conn.close()
        self._idle = []
        self._in_use = 0
        self._cond = threading.Condition(threading.Lock())
        self._pid = os.getpid()

    def get(self, deadline: float) -> Connection:
        if self._pid != os.getpid():
            self._after_fork()
        with self._cond:
            conn: Connection | None
            while True:
                if self._closed:
                    raise ConnectionError("the client is closed")
                if self._idle:
                    conn = self._idle.pop()
                    self._in_use += 1
                    break
                if self._in_use < self.max_connections:
                    conn = None
                    self._in_use += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"all {self.max_connections} connections stayed busy too long")
                self._cond.wait(remaining)
        try:
            if conn is not None and conn.is_stale():
                conn.close()
                conn = None
            if conn is None:
                conn = Connection(self.options, self.core, self.key_prefix)
                conn.connect(deadline)
        except BaseException:
            self._release_slot()
            raise
        return conn

    def put(self, conn: Connection) -> None:
        if conn.pid != os.getpid():
            conn.close()
            return
        with self._cond:
            self._in_use -= 1
            if self._closed or conn.broken or conn.sock is None:
                conn.close()
            else:
                self._idle.append(conn)
            self._cond.notify()

    def discard(self, conn: Connection) -> None:
        conn.close()
        if conn.pid != os.getpid():
            return
        self._release_slot()

    def _release_slot(self) -> None:
        with self._cond:
            self._in_use -= 1
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for conn in idle:
            conn.close()
