"""The asyncio client's subscriber: one connection in the client's loop that wakes the client's
waiting acquires when their lock is released (what to do is decided by ``_flows.wake_book``).

Replies arrive through the protocol's ``on_push``; commands are written at once. A lost
connection wakes every waiter (polling goes on meanwhile) and a task connects again while
anyone waits, subscribing again to every key waited for. Keys nobody waits for are
unsubscribed after a while (a timer); the connection stays open until the client closes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from turbolock._aio.protocol import RedisProtocol
from turbolock._aio.waiting import finished_within, set_within
from turbolock._flows.keepalive import Keepalive
from turbolock._flows.wake_book import IDLE_SECONDS, BookQueries, Ticket, WakeBook
from turbolock.errors import ClientClosedError, ConnectionError, LockError
from turbolock.options import ConnectionOptions

log = logging.getLogger("turbolock")

RECONNECT_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0)
"""Pauses between attempts to connect again after the subscriber connection was lost."""

KEEPALIVE_CHECK = 0.25
"""How often the subscriber's keepalive looks at the connection (see ``_flows.keepalive``)."""


class AsyncWaker(BookQueries):
    """``connect()`` makes the subscriber's connection (where the client's pool connects: one
    server, or the master the Sentinels name)."""

    def __init__(self, options: ConnectionOptions, connect: Callable[[], Awaitable[RedisProtocol]]) -> None:
        self.options = options
        self._open = connect
        self.book = WakeBook()
        self._protocol: RedisProtocol | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._heard: dict[bytes, list[asyncio.Future[None]]] = {}
        self._expiry: asyncio.TimerHandle | None = None
        self._keepalive: asyncio.TimerHandle | None = None
        self._alive = Keepalive(options.timeout, time.monotonic())
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop of its first waiter: its connection, tasks and timers are that loop's."""
        self.failures = 0
        self.connects = 0

    async def join(self, key: bytes, deadline: float) -> Ticket:
        """A ticket for ``key``, once its subscription is confirmed, or the connection failed, or
        ``deadline`` (``time.monotonic()``) passed."""
        if self._closed:
            raise ClientClosedError()
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        ticket = Ticket(key, (event := asyncio.Event()).set, event, self)
        subscribe, unsubscribe = self.book.join(ticket)
        protocol = self._protocol
        if protocol is not None:
            self._send(protocol, subscribe, unsubscribe)
        elif self._connecting is None:
            self._connecting = asyncio.get_running_loop().create_task(self._connect())
        if self.book.pending(key):
            heard = asyncio.get_running_loop().create_future()
            self._heard.setdefault(key, []).append(heard)
            try:
                await finished_within(heard, deadline - time.monotonic())
            except BaseException:
                self.leave(ticket)
                raise
        ticket.heard = self.book.subscribed(key)
        return ticket

    async def wait(self, ticket: Ticket, seconds: float) -> bool:
        """Sleep until ``ticket`` is woken or ``seconds`` pass; whether it was woken."""
        event: asyncio.Event = ticket.event
        await set_within(event, seconds)
        event.clear()
        return self.book.consume(ticket)

    def consume(self, ticket: Ticket) -> None:
        """Forget that ``ticket`` was woken (its next attempt sees the lock as it is)."""
        ticket.event.clear()
        self.book.consume(ticket)

    def leave(self, ticket: Ticket) -> None:
        unsubscribe = self.book.leave(ticket, time.monotonic())
        protocol = self._protocol
        if protocol is None:
            return
        if unsubscribe:
            self._send(protocol, [], unsubscribe)
        if self.book.idle and self._expiry is None:
            self._expiry = protocol.loop.call_later(IDLE_SECONDS, self._expire_idle)

    def _expire_idle(self) -> None:
        self._expiry = None
        protocol = self._protocol
        if protocol is None:
            return
        self._send(protocol, [], self.book.expire_idle(time.monotonic()))
        if self.book.idle:
            self._expiry = protocol.loop.call_later(IDLE_SECONDS / 4, self._expire_idle)

    # -- the connection -------------------------------------------------------------------------

    def _send(self, protocol: RedisProtocol, subscribe: list[bytes], unsubscribe: list[bytes]) -> None:
        if not (subscribe or unsubscribe):
            return
        buffer = protocol.buffer
        for key in subscribe:
            buffer.append_command((b"SSUBSCRIBE", key))
        for key in unsubscribe:
            buffer.append_command((b"SUNSUBSCRIBE", key))
        protocol.write_now()

    async def _connect(self) -> None:
        delays = iter(RECONNECT_DELAYS)
        try:
            while not self._closed and self.book.queues:
                try:
                    protocol = await self._open()
                except LockError as exc:
                    log.debug("turbolock: the subscriber could not connect (%s); waiters poll", exc)
                    self.failures += 1
                    self._tell_waiters(None)
                    await asyncio.sleep(next(delays, RECONNECT_DELAYS[-1]))
                    continue
                if self._closed:
                    protocol.close(ClientClosedError())
                    return
                if not protocol.is_open:  # closed as its handshake ended, before on_close was ours
                    log.debug("turbolock: the subscriber's connection closed as it was made; waiters poll")
                    self.failures += 1
                    self._tell_waiters(None)
                    await asyncio.sleep(next(delays, RECONNECT_DELAYS[-1]))
                    continue
                self.connects += 1
                self._protocol = protocol
                protocol.on_push = self._on_replies
                protocol.on_close = self._on_lost
                self._send(protocol, self.book.resubscribe(), [])
                self._alive = Keepalive(self.options.timeout, time.monotonic())
                self._keepalive = protocol.loop.call_later(KEEPALIVE_CHECK, self._check_alive, protocol)
                return
        finally:
            self._connecting = None

    def _check_alive(self, protocol: RedisProtocol) -> None:
        """Every ``KEEPALIVE_CHECK``: a PING when the connection was quiet, and a connection
        whose PING went unanswered is dropped (then made again)."""
        if protocol is not self._protocol:
            return
        now = time.monotonic()
        if self._alive.dead(now):
            protocol.abort(ConnectionError(f"{protocol.address} did not answer the subscriber's PING "
                                           "in time"))
            return
        if self._alive.ping_due(now):
            protocol.buffer.append_command((b"PING",))
            protocol.write_now()
        self._keepalive = protocol.loop.call_later(KEEPALIVE_CHECK, self._check_alive, protocol)

    def _on_replies(self, replies: list[object]) -> None:
        self._alive.heard(time.monotonic())
        book = self.book
        refusal = book.refusal
        for reply in replies:
            stray = book.on_reply(reply)
            if stray and self._protocol is not None:
                self._send(self._protocol, [], stray)
            if type(reply) is not list:  # refused or redirected: which key, RESP2 does not say
                self._tell_waiters(None)
            elif len(reply) == 3 and reply[0] == b"ssubscribe":
                self._tell_waiters(reply[1])
        if refusal is None and book.refusal is not None:
            server = self._protocol.address if self._protocol is not None else self.options.address
            log.warning("turbolock: %s refused to subscribe to lock releases (%s): blocking acquires "
                        "poll instead of being woken", server, book.refusal)
            self._tell_waiters(None)

    def _tell_waiters(self, key: object) -> None:
        """Wake the joiners waiting for ``key``'s subscription (every joiner for None)."""
        if key is None:
            waiting = [heard for futures in self._heard.values() for heard in futures]
            self._heard.clear()
        else:
            waiting = self._heard.pop(key, [])  # type: ignore[call-overload]
        for heard in waiting:
            if not heard.done():
                heard.set_result(None)

    def _on_lost(self, protocol: RedisProtocol) -> None:
        if self._protocol is not protocol:
            return
        self._protocol = None
        for timer in (self._expiry, self._keepalive):
            if timer is not None:
                timer.cancel()
        self._expiry = self._keepalive = None
        self.book.disconnected()
        self._tell_waiters(None)
        if not self._closed and self.book.queues and self._connecting is None:
            self._connecting = protocol.loop.create_task(self._connect())

    def abandon(self) -> None:
        """The client moved to another event loop: this subscriber is dropped, without running
        anything in its loop once that one is closed (its waiters, of that loop, poll there)."""
        self._closed = True
        protocol, self._protocol = self._protocol, None
        connecting, self._connecting = self._connecting, None
        timers, self._expiry, self._keepalive = (self._expiry, self._keepalive), None, None
        loop = self._loop
        if loop is None or loop.is_closed():
            if protocol is not None:
                protocol.forget(ClientClosedError())
            return
        for timer in timers:
            if timer is not None:
                timer.cancel()
        if connecting is not None:
            connecting.cancel()
        if protocol is not None:
            protocol.on_close = None
            protocol.abort(ClientClosedError())

    def in_running_loop(self) -> bool:
        """Whether this subscriber belongs to the running loop (or to none yet)."""
        return self._loop is None or self._loop is asyncio.get_running_loop()

    async def close(self) -> None:
        self._closed = True
        connecting, self._connecting = self._connecting, None
        if connecting is not None:
            connecting.cancel()
            await asyncio.wait([connecting])
        for timer in (self._expiry, self._keepalive):
            if timer is not None:
                timer.cancel()
        self._expiry = self._keepalive = None
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            protocol.on_close = None
            protocol.close(ClientClosedError())
        self.book.disconnected()
        self._tell_waiters(None)
