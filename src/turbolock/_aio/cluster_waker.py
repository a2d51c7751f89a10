"""An asyncio Redis Cluster client's subscribers: one ``AsyncWaker`` per master, each key's
waiters on the master of its slot (see ``_sync.cluster_waker``). A key whose master is not
known gets a ticket that only polls."""

from __future__ import annotations

import asyncio

from turbolock._aio.cluster import ClusterExecutor
from turbolock._aio.waiting import set_within
from turbolock._aio.waker import AsyncWaker
from turbolock._flows.wake_book import Ticket
from turbolock._wire.slot_map import Address
from turbolock.errors import ClientClosedError, LockError
from turbolock.options import ConnectionOptions


class AsyncClusterWaker:
    def __init__(self, options: ConnectionOptions, cluster: ClusterExecutor, key_prefix: bytes) -> None:
        self.options = options
        self._cluster = cluster
        self._prefix = key_prefix
        self._wakers: dict[Address, AsyncWaker] = {}
        self._closed = False
        self._polling: set[Ticket] = set()
        """Tickets that only poll: ``close`` wakes them as it wakes the masters' waiters."""

    def _known(self, key: bytes) -> AsyncWaker | None:
        address = self._cluster.routes.master_of(key[len(self._prefix):])
        if address is None:
            for waker in self._wakers.values():  # no map: where the key waits already, if anywhere
                if waker.queued(key) or waker.listening(key):
                    return waker
            return None
        known = self._wakers.get(address)
        if known is None and not self._closed:  # none made after close: its connection would outlive it
            pool = self._cluster.node(address).pool
            known = self._wakers[address] = AsyncWaker(pool.options, pool.open_unpooled)
        return known

    async def join(self, key: bytes, deadline: float) -> Ticket:
        if self._closed:  # as one server's waker: a fair waiter's attempt after close ends there
            raise ClientClosedError()
        waker = self._known(key)
        if waker is None:
            try:
                await self._cluster.refresh(deadline)
            except LockError:
                pass
            waker = self._known(key)
        if waker is not None:
            return await waker.join(key, deadline)
        if self._closed:  # closed while the map was read
            raise ClientClosedError()
        event = asyncio.Event()
        ticket = Ticket(key, event.set, event, self)  # never heard: it polls
        self._polling.add(ticket)
        return ticket

    # A ticket that only polls has this as its home.
    async def wait(self, ticket: Ticket, seconds: float) -> bool:
        await set_within(ticket.event, seconds)
        return False

    def consume(self, ticket: Ticket) -> None:
        ticket.event.clear()

    def leave(self, ticket: Ticket) -> None:
        self._polling.discard(ticket)

    def listening(self, key: bytes) -> bool:
        waker = self._known(key)
        return waker is not None and waker.listening(key)

    def queued(self, key: bytes) -> bool:
        waker = self._known(key)
        return waker is not None and waker.queued(key)

    def waiting(self) -> bool:
        return any(waker.waiting() for waker in self._wakers.values())

    def abandon(self) -> None:
        self._closed = True
        self._polling.clear()  # of the loop left behind: they poll there
        for waker in list(self._wakers.values()):
            waker.abandon()

    def in_running_loop(self) -> bool:
        return all(waker.in_running_loop() for waker in self._wakers.values())

    async def close(self) -> None:
        self._closed = True
        for ticket in self._polling:
            ticket.event.set()
        for waker in list(self._wakers.values()):
            await waker.close()
