"""Sets of connections, one per master, that a Redlock client keeps between calls.

A Redlock call talks to every master, so taking a connection out of each master's pool and
putting it back costs N lock round trips and, since every call reads before a per-node
deadline, N re-armings of the socket's kernel timeout to the pool's default and back.
Measured with 3 masters that was about a third of a single acquire+release. A set stays
checked out of the pools instead (the pools count its connections as in use), its sockets
keep the node timeout, and only a connection found broken or stale goes back to its pool.

Each thread takes a whole set (or a new, empty one) and gives it back when its call ends,
so a set is never shared; a forked child drops its parent's sets without touching them.
"""

from __future__ import annotations

import os
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from turbolock._sync.connection import Connection
from turbolock._sync.pool import STALE_CHECK_AFTER
from turbolock._wire.outcomes import floored
from turbolock._wire.ready import readable
from turbolock.client import LockClient
from turbolock.errors import LockError

# Masters are read one after another: once a stuck one has used up the wait, the others'
# replies (handshakes, chunks) already in their sockets still get this long to be read.
READ_GRACE = 0.002
# Below this much difference, a socket's kernel timeout is left as it is.
_TIMEOUT_SLACK = 0.001

_all_links: weakref.WeakSet[Links] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for links in list(_all_links):
        links.forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)

ConnectionSet = list[Connection | None]


def _dial_due(conn: Connection | None) -> float:
    """When a connect ``Connection.connect(finish=False)`` started must be done."""
    assert conn is not None and conn.handshake is not None
    return conn.handshake[1]


class Links:
    def __init__(self, clients: Sequence[LockClient]) -> None:
        self.clients = tuple(clients)
        self._idle: deque[ConnectionSet] = deque()
        self._closed = False
        _all_links.add(self)

    def take(self) -> ConnectionSet:
        """A set for this call: idle connections where there are some, None where not."""
        try:
            return self._idle.pop()
        except IndexError:
            return [None] * len(self.clients)

    def give(self, conns: ConnectionSet) -> None:
        """Back after a call; every connection in it is idle (nothing left unread). Parked for
        the next call, unless some master's pool has no connection to spare: then back to the
        pools, where a thread waits for one (another Redlock call's, the renewer's, a master
        LockClient's own call), instead of for a set nobody gives back to a pool."""
        now = time.monotonic()
        for m, conn in enumerate(conns):
            if conn is None:
                continue
            if conn.handshake is not None:  # its connect interrupted half-way: never to be reused
                self.drop(conns, m)
                continue
            conn.last_used = now
        if self._closed or any(client._pool.exhausted() for client in self.clients):  # parked sets count
            self._return(conns)
        else:
            self._idle.append(conns)

    def connect(self, conns: ConnectionSet, m: int, timeout: float, finish: bool = True,
                deadline: float | None = None) -> Connection:
        """Master ``m``'s connection in this set, reused, or a fresh one from its pool if it has
        none or the server closed it (a restart), with the socket's kernel timeout set to
        ``timeout``; a pool with no connection to spare is waited for until ``deadline`` (one
        ``timeout`` from now by default). Raises what the pool raises."""
        conn = conns[m]
        if conn is not None and (conn.sock is None or (time.monotonic() - conn.last_used > STALE_CHECK_AFTER
                                                       and conn.is_stale())):
            conns[m] = None
            self.clients[m]._pool.discard(conn)
            conn = None
        if conn is None:
            if deadline is None:
                deadline = time.monotonic() + timeout
            conn = self.clients[m]._pool.get(deadline, finish)
            conns[m] = conn
        if abs(conn.kernel_timeout - timeout) > _TIMEOUT_SLACK and conn.sock is not None and not conn.tls:
            conn._set_kernel_timeout(conn.sock, timeout)
        return conn

    def connect_all(self, conns: ConnectionSet, masters: Iterable[int],
                    timeout: float) -> dict[int, BaseException]:
        """``connect`` for several masters, the handshakes of new connections sent to all before
        any is read: masters that do not answer cost one ``timeout`` together, not one each.
        The errors of the masters that could not be reached."""
        failed, opened = self.open_all(conns, masters, timeout)
        self.finish_all(conns, opened, time.monotonic() + timeout, failed)
        return failed

    def open_all(self, conns: ConnectionSet, masters: Iterable[int],
                 timeout: float) -> tuple[dict[int, BaseException], list[int]]:
        """``connect`` for several masters, without waiting for the handshakes of the new
        connections: the errors of the masters that could not be reached, and the masters whose
        handshake is on its way (for ``finish_all``). Pools with no connection to spare cost one
        ``timeout`` together, not one each."""
        failed: dict[int, BaseException] = {}
        opened: list[int] = []
        deadline = time.monotonic() + timeout
        for m in masters:
            try:
                conn = self.connect(conns, m, timeout, False, deadline)
            except (LockError, OSError) as exc:
                failed[m] = exc
                continue
            if conn.handshake is not None:
                opened.append(m)
        return failed, opened

    def finish_all(self, conns: ConnectionSet, opened: list[int], deadline: float,
                   failed: dict[int, BaseException], joined: Callable[[int], None] | None = None) -> None:
        """Finish the connects ``open_all`` started and read their handshakes, by ``deadline``,
        each as soon as it is in (a master that does not answer, or whose host does not, holds
        up none of the others); ``joined(m)`` runs at once for each master whose handshake
        succeeded (a caller writes to it then, not after the slowest). A master that fails goes
        into ``failed``."""
        dialing: dict[Any, int] = {}
        waiting: dict[Any, int] = {}
        for m in opened:
            opening = conns[m]
            assert opening is not None
            (dialing if opening.dialing else waiting)[opening.sock] = m
        while waiting or dialing:
            # A connect gets its own connect timeout at most, whatever is left of the call's.
            due = min([deadline, *(_dial_due(conns[m]) for m in dialing.values())])
            left = due - time.monotonic()
            ready = readable(tuple(waiting), left, tuple(dialing)) if left > 0 else []
            now = time.monotonic()
            if now >= deadline:  # once the deadline has passed, what is already here is still read
                ready = [*ready, *(sock for sock in [*dialing, *waiting] if sock not in ready)]
            else:  # connects whose time ran out: a timeout each
                ready += [sock for sock, m in dialing.items()
                          if sock not in ready and _dial_due(conns[m]) <= now]
            for sock in ready:
                m = dialing.pop(sock) if sock in dialing else waiting.pop(sock)
                opening = conns[m]
                assert opening is not None
                try:
                    if opening.dialing:  # connected (or failed): its handshake goes out now
                        opening.finish_dial(deadline)
                        waiting[opening.sock] = m
                        continue
                    opening.finish_connect(floored(deadline, READ_GRACE))
                except (LockError, OSError) as exc:
                    self.drop(conns, m)
                    failed[m] = exc
                    continue
                if joined is not None:
                    joined(m)

    def drop(self, conns: ConnectionSet, m: int) -> None:
        """Master ``m``'s connection failed mid-call: its replies are unaccounted for."""
        conn = conns[m]
        if conn is not None:
            conns[m] = None
            self.clients[m]._pool.discard(conn)

    def _return(self, conns: ConnectionSet) -> None:
        for m, conn in enumerate(conns):
            if conn is None:
                continue
            conns[m] = None
            pool = self.clients[m]._pool
            if conn.sock is not None and conn.kernel_timeout != conn.options.timeout:
                conn._set_kernel_timeout(conn.sock, conn.options.timeout)
            pool.put(conn)

    def close(self) -> None:
        """Give every idle connection back to its pool (a master's LockClient may live on); a
        set given back from now on goes back to the pools too."""
        self._closed = True
        while True:
            try:
                conns = self._idle.pop()
            except IndexError:
                return
            self._return(conns)

    def forget_after_fork(self) -> None:
        # The parent still owns these sockets: close only our copies of the descriptors. The
        # pools have already forgotten them (a new generation), so nothing goes back there.
        idle, self._idle = self._idle, deque()
        for conns in idle:
            for conn in conns:
                if conn is not None:
                    conn.close()
