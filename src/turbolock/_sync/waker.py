"""The threaded client's subscriber: one connection and one thread that wake the client's
blocking acquires when their lock is released (what to do is decided by ``_flows.wake_book``).

The thread owns the socket, reading and writing alike (a TLS socket must not be used by two
threads at once): a waiter that needs a key subscribed queues the command and pokes the thread
through a socket pair. A lost connection wakes every waiter (polling goes on meanwhile); the
thread connects again while anyone waits, subscribing again to every key waited for, and ends
when nobody waits any more (the next waiter starts it again).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

from turbolock._flows.keepalive import Keepalive
from turbolock._flows.wake_book import BookQueries, Ticket, WakeBook
from turbolock._sync.connection import Connection
from turbolock._wire.ready import readable
from turbolock.errors import ClientClosedError, ConnectionError, LockError, ProtocolError
from turbolock.options import ConnectionOptions

log = logging.getLogger("turbolock")

RECONNECT_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0)
"""Pauses between attempts to connect again after the subscriber connection was lost."""

IDLE_POLL = 0.25
"""How often an idle subscriber thread looks up from ``select``, to unsubscribe the keys idle
too long (a close, or a waiter's command, wakes it at once)."""

IDLE_CLOSE = 30.0
"""Seconds with nobody waiting after which the subscriber connection is closed (and its thread
ends); until then a waiter of a key still subscribed needs no round trip to be heard."""


class Waker(BookQueries):
    """``connect(deadline)`` makes the subscriber's connection (where the client's pool connects:
    one server, or the master the Sentinels name)."""

    def __init__(self, options: ConnectionOptions, connect: Callable[[float], Connection]) -> None:
        self.options = options
        self._open = connect
        self._setup()

    def _setup(self) -> None:
        self.book = WakeBook()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._outbox: list[tuple[bytes, ...]] = []
        self._conn: Connection | None = None
        self._thread: threading.Thread | None = None
        self._poke_r, self._poke_w = socket.socketpair()
        self._poke_r.setblocking(False)
        self._poke_w.setblocking(False)
        self._closed = False
        self._last_waiter = 0.0
        self.failures = 0
        """Failed attempts to connect (a waiter stops waiting for its subscription after one)."""
        self.connects = 0
        """Connections made so far."""

    # -- waiters' side ----------------------------------------------------------------------------

    def join(self, key: bytes, deadline: float) -> Ticket:
        """A ticket for ``key``, once its subscription is confirmed, or the connection failed, or
        ``deadline`` passed (then the waiter polls, woken only if the subscription comes later)."""
        event = threading.Event()
        ticket = Ticket(key, event.set, event, self)
        with self._lock:
            if self._closed:
                raise ClientClosedError()
            subscribe, unsubscribe = self.book.join(ticket)
            self._last_waiter = time.monotonic()
            self._outbox.extend((b"SSUBSCRIBE", k) for k in subscribe)
            self._outbox.extend((b"SUNSUBSCRIBE", k) for k in unsubscribe)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="turbolock-waker", daemon=True)
                self._thread.start()
            elif subscribe or unsubscribe:
                self._poke()
            failures = self.failures
            try:
                while self.book.pending(key) and self.failures == failures and not self._closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._changed.wait(remaining)
            except BaseException:  # KeyboardInterrupt: the flow never gets the ticket to leave with
                self._leave(ticket)
                raise
            ticket.heard = self.book.subscribed(key)
        return ticket

    def wait(self, ticket: Ticket, seconds: float) -> bool:
        """Sleep until ``ticket`` is woken or ``seconds`` pass; whether it was woken."""
        event: threading.Event = ticket.event
        if not self._closed:  # closed: the waiter looks up at once and finds its client closed
            event.wait(seconds)
        with self._lock:
            event.clear()
            return self.book.consume(ticket)

    def consume(self, ticket: Ticket) -> None:
        """Forget that ``ticket`` was woken (its next attempt sees the lock as it is)."""
        with self._lock:
            ticket.event.clear()
            self.book.consume(ticket)

    def leave(self, ticket: Ticket) -> None:
        with self._lock:
            self._leave(ticket)

    def _leave(self, ticket: Ticket) -> None:
        """``leave`` with the lock held."""
        self._last_waiter = now = time.monotonic()
        unsubscribe = self.book.leave(ticket, now)
        if unsubscribe and self._conn is not None:
            self._outbox.extend((b"SUNSUBSCRIBE", k) for k in unsubscribe)
            self._poke()

    def _idle(self) -> bool:
        """With the lock held: whether the thread has nothing left to do."""
        return self._closed or (not self.book.queues and time.monotonic() - self._last_waiter >= IDLE_CLOSE)

    def _poke(self) -> None:
        try:
            self._poke_w.send(b"x")
        except OSError:  # full: a poke is already waiting to be read
            pass

    # -- the subscriber thread --------------------------------------------------------------------

    def _run(self) -> None:
        delays = iter(RECONNECT_DELAYS)
        while True:
            with self._lock:
                if self._closed or not self.book.queues:  # connect again only for someone
                    self._thread = None
                    if self._conn is not None:
                        self._lost(self._conn)
                    return
            try:
                conn = self._connect()
            except LockError as exc:
                log.debug("turbolock: the subscriber could not connect (%s); waiters poll", exc)
                with self._lock:
                    self.failures += 1
                    self._changed.notify_all()
                    if not self._closed:  # a pause close() ends (it notifies)
                        self._changed.wait(next(delays, RECONNECT_DELAYS[-1]))
                continue
            delays = iter(RECONNECT_DELAYS)
            try:
                self._serve(conn)
            except (OSError, ValueError, LockError) as exc:
                log.debug("turbolock: the subscriber connection failed: %s", exc)
            with self._lock:
                self._lost(conn)

    def _connect(self) -> Connection:
        conn = self._open(time.monotonic() + self.options.connect_timeout)
        with self._lock:
            self._conn = conn
            self.connects += 1
            # Everything queued for the old connection is replaced: a new one starts with no
            # subscription, and every key waited for is subscribed again.
            self._outbox = [(b"SSUBSCRIBE", k) for k in self.book.resubscribe()]
        return conn

    def _serve(self, conn: Connection) -> None:
        """Write what waiters queued and read what the server sends, until the connection fails,
        the client closes, or nobody waits any more."""
        sock = conn.sock
        assert sock is not None
        parser = conn.parser
        view = memoryview(bytearray(65536))
        poke = self._poke_r
        alive = Keepalive(self.options.timeout, time.monotonic())
        while True:
            now = time.monotonic()
            with self._lock:
                if self._idle():
                    return
                outbox, self._outbox = self._outbox, []
                outbox.extend((b"SUNSUBSCRIBE", k) for k in self.book.expire_idle(now))
            if alive.dead(now):
                raise ConnectionError(f"{conn.options.address} did not answer the subscriber's PING in time")
            if alive.ping_due(now):
                outbox.append((b"PING",))
            if outbox:
                buffer = conn.buffer
                for command in outbox:
                    buffer.append_command(command)
                sock.sendall(buffer.take())
            pending = getattr(sock, "pending", None)
            if pending is None or not pending():
                ready = readable((sock, poke), IDLE_POLL)
                if poke in ready:
                    try:
                        poke.recv(4096)
                    except BlockingIOError:
                        pass
                if sock not in ready:
                    continue
            n = sock.recv_into(view)
            if not n:
                raise ConnectionError(f"{conn.options.address} closed the subscriber connection")
            alive.heard(time.monotonic())
            parser.feed(view[:n])
            try:
                replies = parser.get_replies()
            except ProtocolError:
                raise
            if replies:
                with self._lock:
                    refusal = self.book.refusal
                    for reply in replies:
                        self._outbox.extend((b"SUNSUBSCRIBE", k) for k in self.book.on_reply(reply))
                    self._changed.notify_all()
                if refusal is None and self.book.refusal is not None:
                    log.warning("turbolock: %s refused to subscribe to lock releases (%s): blocking "
                                "acquires poll instead of being woken", conn.options.address,
                                self.book.refusal)

    def _lost(self, conn: Connection) -> None:
        """With the lock held: ``conn`` is gone, and its subscriptions with it."""
        conn.close()
        if self._conn is conn:
            self._conn = None
            self.book.disconnected()
            self._changed.notify_all()

    def close(self, deadline: float) -> None:
        """Stop (``stop``), and wait for the thread until ``deadline`` at most: it is a daemon."""
        join_by(self.stop(), deadline)

    def stop(self) -> threading.Thread | None:
        """Wake every waiter, which looks up and finds the client closed, and tell the thread to
        close the connection as soon as it looks up (at once when it waits in ``select``; a
        connect in progress ends within its own timeout); its thread, not waited for."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._changed.notify_all()
            for queue in self.book.queues.values():
                for ticket in queue:
                    ticket.event.set()
        self._poke()
        return thread

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's socket and thread are not ours."""
        conn = self._conn
        if conn is not None and conn.sock is not None:
            conn.sock.close()
        self._poke_r.close()
        self._poke_w.close()
        self._setup()


def join_by(thread: threading.Thread | None, deadline: float) -> None:
    """Wait for a stopped waker's ``thread`` until ``deadline`` at most."""
    if thread is not None and thread is not threading.current_thread():
        thread.join(max(0.0, deadline - time.monotonic()))
