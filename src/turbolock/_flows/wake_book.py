"""Waking waiters when a lock is released, sans-IO: who waits for which key, which keys the
subscriber connection must (un)subscribe, and whom a release message wakes.

The release script publishes on the lock's key as a sharded channel (``SPUBLISH key``: on a
Redis Cluster the channel lives on the key's own shard). A client keeps one subscriber
connection; every blocking acquire of the process that finds its lock held takes a ``Ticket``
for the key and waits on it. The threaded and the asyncio wakers (``_sync.waker``,
``_aio.waker``) move the bytes and the wake-ups; this book decides.

- No lost wake-up: a waiter attempts again once its key's subscription is confirmed, so a
  release between its failed attempt and the subscription is seen by that attempt.
- One release wakes one waiter of the process (the longest waiting one not yet woken), in
  arrival order: a release frees one lock, and waking every waiter would send them all to the
  server for one winner. A woken waiter that leaves without trying passes its wake-up on.
  Fair waiters (``fair_scripts``) are woken by their place in the server's queue instead.
- A subscription that may have missed messages (the connection was lost, or just made) wakes
  every waiter of its key: they try again, and polling with backoff stays the safety net.
- Subscriptions outlive their waiters for ``IDLE_SECONDS``, up to ``IDLE_SUBSCRIPTIONS`` keys
  nobody waits for (the least recently used are unsubscribed first): a contended key is
  subscribed once, not once per wait.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

IDLE_SUBSCRIPTIONS = 1024
"""Keys kept subscribed with nobody waiting for them."""

IDLE_SECONDS = 1.0
"""How long a key stays subscribed after its last waiter left. Short: a release counts the
subscribers it told, and a subscriber nobody behind it waits for would make the releaser yield
for nothing (see ``ClientRules._released``)."""

REDIRECTS = ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN")
"""Error replies of a Redis Cluster that say where a key lives now, not that subscribing is refused."""
PASSING = ("BUSY", "LOADING", "MASTERDOWN")
"""Refusals that pass (a long script running, a restart loading its data, a master gone):
never taken for a server that will not let this client subscribe."""

NONE, SUBSCRIBING, SUBSCRIBED, AFTER_UNSUBSCRIBE = 0, 1, 2, 3
"""A key's subscription: none (a key still in ``state`` with NONE has its SUNSUBSCRIBE in
flight), asked, confirmed, or asked again while an earlier SUNSUBSCRIBE is in flight (the
confirmation of the first SSUBSCRIBE then says nothing: the SUNSUBSCRIBE comes after it)."""


class Ticket:
    """One waiter's place in its key's queue. ``wake`` is the driver's (an event's ``set``);
    ``heard`` says whether the key's subscription was confirmed when the waiter joined (if
    not, the waiter keeps polling at the pace of a waiter that is never woken)."""

    __slots__ = ("key", "woken", "wake", "heard", "event", "home", "rank")

    def __init__(self, key: bytes, wake: Callable[[], None], event: Any = None, home: Any = None) -> None:
        self.key = key
        self.woken = False
        self.wake = wake
        self.heard = False
        self.event = event
        self.home = home
        """The waker the ticket waits in (its ``wait``, ``consume`` and ``leave``)."""
        self.rank = 0
        """A fair waiter's place in the server's queue (``fair_scripts``): the lowest is woken
        first. 0 for the others, woken in arrival order."""

    def __repr__(self) -> str:
        return f"Ticket(woken={self.woken})"


class WakeBook:
    """The waiters and the subscriptions of one subscriber connection. Not thread-safe: the
    threaded waker holds its lock around every call."""

    def __init__(self, idle_limit: int = IDLE_SUBSCRIPTIONS) -> None:
        self.queues: dict[bytes, list[Ticket]] = {}
        self.state: dict[bytes, int] = {}
        self.idle: OrderedDict[bytes, float] = OrderedDict()
        """Subscribed keys nobody waits for, oldest first, with when they became idle."""
        self.idle_limit = idle_limit
        self.refusal: str | None = None
        """Why the server refused a subscription, once it did: from then on waiters only poll."""

    def join(self, ticket: Ticket) -> tuple[list[bytes], list[bytes]]:
        """Queue ``ticket``; the keys to subscribe (its own, when it is not yet) and the idle
        keys to unsubscribe to stay within the limit."""
        key = ticket.key
        queue = self.queues.get(key)
        if queue is None:
            self.queues[key] = [ticket]
            self.idle.pop(key, None)
        else:
            queue.append(ticket)
        state = self.state.get(key)
        subscribe = [key] if (state is None or state == NONE) and self.refusal is None else []
        if subscribe:
            self.state[key] = SUBSCRIBING if state is None else AFTER_UNSUBSCRIBE
        return subscribe, self._evict()

    def subscribed(self, key: bytes) -> bool:
        return self.state.get(key, NONE) == SUBSCRIBED

    def pending(self, key: bytes) -> bool:
        """Whether ``key``'s subscription is asked for and not yet confirmed (nor refused)."""
        return self.state.get(key, NONE) in (SUBSCRIBING, AFTER_UNSUBSCRIBE)

    def listening(self, key: bytes) -> bool:
        """Whether this connection is (or is about to be) subscribed to ``key``."""
        return self.state.get(key, NONE) != NONE

    def leave(self, ticket: Ticket, now: float = 0.0) -> list[bytes]:
        """Take ``ticket`` out of its queue (a wake-up it did not use goes to the next waiter);
        the idle keys to unsubscribe to stay within the limit."""
        key = ticket.key
        queue = self.queues.get(key)
        if queue is None or ticket not in queue:
            return []
        queue.remove(ticket)
        if ticket.woken:
            ticket.woken = False
            self._wake_one(queue)
        if queue:
            return []
        del self.queues[key]
        if self.state.get(key, NONE) == NONE:
            return []
        self.idle[key] = now
        return self._evict()

    def expire_idle(self, now: float, seconds: float = IDLE_SECONDS) -> list[bytes]:
        """The idle keys to unsubscribe at ``now``: those idle for ``seconds``."""
        idle = self.idle
        expired: list[bytes] = []
        for key, since in idle.items():
            if now - since < seconds:
                break
            expired.append(key)
        for key in expired:
            del idle[key]
            self.state[key] = NONE
        return expired

    def consume(self, ticket: Ticket) -> bool:
        """Whether ``ticket`` was woken since it last asked (and it is no longer)."""
        woken, ticket.woken = ticket.woken, False
        return woken

    def on_reply(self, reply: object) -> list[bytes]:
        """A message, a confirmation or a refusal read from the subscriber connection; the keys
        to unsubscribe: a confirmation of a key whose ask an error reply took for refused (RESP2
        does not say which key an error answers) and that nobody waits for any more."""
        if type(reply) is not list:
            if reply == b"PONG":  # the keepalive's answer on a connection with no subscription left
                return []
            if "'ping'" in str(reply):  # the keepalive's PING refused (a user without +ping): an answer too
                return []
            if str(reply).startswith(REDIRECTS + PASSING):  # its waiters poll; later ones ask again
                self._not_subscribed()
            else:
                self._refused(reply)
            return []
        if len(reply) != 3:
            return []
        kind, key = reply[0], reply[1]
        if type(key) is not bytes:
            return []
        if kind == b"smessage":
            queue = self.queues.get(key)
            if queue:
                self._wake_one(queue)
        elif kind == b"ssubscribe":
            state = self.state.get(key)
            if state == SUBSCRIBING or (state is None and self.queues.get(key)):
                self.state[key] = SUBSCRIBED
                self._wake_all(key)
            elif state is None:  # subscribed on the server all the same: not left there for nobody
                self.state[key] = NONE
                return [key]
        elif kind == b"sunsubscribe":
            state = self.state.get(key)
            if state == NONE:
                del self.state[key]
            elif state == AFTER_UNSUBSCRIBE:
                self.state[key] = SUBSCRIBING
            elif state == SUBSCRIBED:  # the server's own doing: a cluster moved the key's slot
                del self.state[key]
                self.idle.pop(key, None)
                self._wake_all(key)
        return []

    def _refused(self, reply: object) -> None:
        """An error reply (a user without channel permissions, a server without SSUBSCRIBE):
        no key will ever be heard, so no waiter waits for a subscription again."""
        self.refusal = str(reply)
        self._not_subscribed()

    def _not_subscribed(self) -> None:
        """The subscriptions asked for are not made (which one an error answers, RESP2 does not
        say): their waiters poll, and a later waiter of those keys asks again."""
        for key, state in list(self.state.items()):
            if state in (SUBSCRIBING, AFTER_UNSUBSCRIBE):
                del self.state[key]

    def disconnected(self) -> None:
        """The connection is gone, and every subscription with it: every waiter tries again."""
        self.state.clear()
        self.idle.clear()
        for key in self.queues:
            self._wake_all(key)

    def resubscribe(self) -> list[bytes]:
        """The keys to subscribe on a new connection: every key someone waits for. Nothing else
        is subscribed there, so every other key is forgotten: one asked for while no connection
        was up and left since (a cancelled waiter) would otherwise stay "subscribing" and make
        its next waiter wait for a confirmation that never comes."""
        self.state.clear()
        self.idle.clear()
        keys = list(self.queues)
        for key in keys:
            self.state[key] = SUBSCRIBING
        return keys

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self.queues.values())

    def _evict(self) -> list[bytes]:
        idle = self.idle
        evicted: list[bytes] = []
        while len(idle) > self.idle_limit:
            key, _ = idle.popitem(last=False)
            self.state[key] = NONE  # until its SUNSUBSCRIBE is confirmed (then forgotten)
            evicted.append(key)
        return evicted

    def _wake_one(self, queue: list[Ticket]) -> None:
        chosen: Ticket | None = None
        for ticket in queue:
            if not ticket.woken and (chosen is None or ticket.rank < chosen.rank):
                chosen = ticket
                if not ticket.rank:  # not a fair waiter: the first in arrival order
                    break
        if chosen is not None:
            chosen.woken = True
            chosen.wake()

    def _wake_all(self, key: bytes) -> None:
        for ticket in self.queues.get(key, ()):
            ticket.woken = True
            ticket.wake()


class BookQueries:
    """What the clients ask a waker about its book (both drivers' wakers share these)."""

    book: WakeBook

    def listening(self, key: bytes) -> bool:
        """Whether this subscriber is (or is about to be) subscribed to ``key``."""
        return self.book.listening(key)

    def queued(self, key: bytes) -> bool:
        """Whether waiters of this client wait for ``key``."""
        return key in self.book.queues

    def waiting(self) -> bool:
        """Whether any waiter of this client waits."""
        return bool(self.book.queues)
