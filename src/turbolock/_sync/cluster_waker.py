"""A Redis Cluster client's subscribers: one ``Waker`` per master, each key's waiters on the
master of its slot (the release publishes on the key's own shard). A key whose master is not
known (no slot map, a map that cannot be read) gets a ticket that only polls."""

from __future__ import annotations

import threading

from turbolock._flows.wake_book import Ticket
from turbolock._sync.cluster import ClusterExecutor
from turbolock._sync.waker import Waker, join_by
from turbolock._wire.slot_map import Address
from turbolock.errors import ClientClosedError, LockError
from turbolock.options import ConnectionOptions


class ClusterWaker:
    def __init__(self, options: ConnectionOptions, cluster: ClusterExecutor, key_prefix: bytes) -> None:
        self.options = options
        self._cluster = cluster
        self._prefix = key_prefix
        self._wakers: dict[Address, Waker] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._polling: set[Ticket] = set()
        """Tickets that only poll: ``stop`` wakes them as it wakes the masters' waiters."""

    def _master(self, key: bytes, deadline: float | None) -> Waker | None:
        """The waker of ``key``'s master; with a ``deadline``, the slot map is read if need be."""
        routes = self._cluster.routes
        name = key[len(self._prefix):]
        address = routes.master_of(name)
        if address is None and deadline is not None:
            try:
                self._cluster.refresh(deadline)
            except LockError:
                return None
            address = routes.master_of(name)
        if address is None:
            return self._wakers_at(key)
        with self._lock:
            waker = self._wakers.get(address)
            if waker is None and not self._closed:  # none made after close: its connection would outlive it
                pool = self._cluster.node(address).pool
                waker = self._wakers[address] = Waker(pool.options, pool.open_unpooled)
            return waker

    def _wakers_at(self, key: bytes) -> Waker | None:
        """Without a map: the waker where ``key`` waits already, if any."""
        for waker in list(self._wakers.values()):
            if waker.queued(key) or waker.listening(key):
                return waker
        return None

    def join(self, key: bytes, deadline: float) -> Ticket:
        if self._closed:  # as one server's waker
            raise ClientClosedError()
        waker = self._master(key, deadline)
        if waker is not None:
            return waker.join(key, deadline)
        event = threading.Event()
        ticket = Ticket(key, event.set, event, self)  # never heard: it polls
        with self._lock:
            if self._closed:
                raise ClientClosedError()
            self._polling.add(ticket)
        return ticket

    # A ticket that only polls has this as its home.
    def wait(self, ticket: Ticket, seconds: float) -> bool:
        ticket.event.wait(seconds)
        return False

    def consume(self, ticket: Ticket) -> None:
        ticket.event.clear()

    def leave(self, ticket: Ticket) -> None:
        with self._lock:
            self._polling.discard(ticket)

    def listening(self, key: bytes) -> bool:
        waker = self._master(key, None)
        return waker is not None and waker.listening(key)

    def queued(self, key: bytes) -> bool:
        waker = self._master(key, None)
        return waker is not None and waker.queued(key)

    def waiting(self) -> bool:
        return any(waker.waiting() for waker in list(self._wakers.values()))

    def stop(self) -> list[threading.Thread | None]:
        """Every master's waker stopped (each waiter woken, finding its client closing); their
        threads, not waited for."""
        with self._lock:
            self._closed = True
            for ticket in self._polling:
                ticket.event.set()
        return [waker.stop() for waker in list(self._wakers.values())]

    def close(self, deadline: float) -> None:
        """``stop``, then each thread waited for until ``deadline``: every master's waiters are
        woken before any thread is waited for (a subscriber stuck connecting to a stopped master
        held up the waiters of every master after it)."""
        for thread in self.stop():
            join_by(thread, deadline)

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's subscribers, and its close if one was under way, are the
        parent's (as one server's waker, ``Waker.forget_after_fork``)."""
        for waker in list(self._wakers.values()):
            waker.forget_after_fork()
        self._wakers = {}
        self._lock = threading.Lock()
        self._closed = False
        self._polling = set()
