"""A client's closing, written once for the threaded and the asyncio clients: the closed state
every call checks (``Closable``), what every ``close()`` does first (stop its renewer and
release every lock the renewer still kept, by one deadline), and the calls under way a close()
lets end before it closes the connections they need."""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from typing import Any, TypeVar

from turbolock._flows.steps import Call, Flow, Sleep
from turbolock.errors import ClientClosedError, LockError

log = logging.getLogger("turbolock")
T = TypeVar("T")

CLOSE_POLL = 0.001
"""How often close() looks whether the calls under way have ended."""

NOT_RETRIED = "the client was closed meanwhile: not retried, it expires by its ttl"
"""The fate of a release whose outcome was lost, once the client is closing."""


class Closable:
    """Every client's closed flag: set by ``close()``, after which every public call raises."""

    _closed = False

    @property
    def closed(self) -> bool:
        """Whether the client is closed (``close()`` sets it once it released what it renewed): a
        call made from then on raises ``ClientClosedError``, while those already under way are
        served until ``close()``'s deadline."""
        return self._closed

    def _refuse_if_closed(self) -> None:
        """A call on a closed client: ``ClientClosedError`` before anything is sent (a Redlock
        master's closed connection would read as a master that did not answer), even for a bulk
        call with nothing to send, so that a use after close shows whatever the input."""
        if self._closed:
            raise ClientClosedError()

    _closing = False
    """``close()`` has begun: a waiter's wait ends at once, and it makes no attempt after it (a
    lock taken now would be neither renewed nor released by that close)."""

    def _refuse_if_closing(self) -> None:
        """A waiter's next attempt once ``close()`` has begun: ``ClientClosedError`` instead."""
        if self._closing or self._closed:
            raise ClientClosedError()

    _closing_fate = NOT_RETRIED
    """What becomes of such a release once the client is closing (no background release comes
    any more)."""

    def _owed_release_fate(self, retried: str) -> str:
        """What becomes of a release whose outcome was lost, for an error's message: ``retried``
        in the background, or ``_closing_fate`` when the client closed during the call."""
        if self._closed:
            return self._closing_fate
        return retried


def stop_renewing_flow(client: Any, deadline: float = math.inf) -> Flow[None]:
    """Stop ``client``'s renewer (a round in flight may finish until ``deadline``) and release the
    locks it kept with ``client._release_renewed(leases, deadline)``; a failure is logged, since
    the locks then expire by their ttl. Those of leases the program dropped go to the client's
    maybe-held releases, which its close() tries next."""
    renewer = client._stop_renewals()
    if renewer is None:
        return
    yield Call(renewer.stop, (None if deadline == math.inf else deadline,))
    renewer._release_dropped()  # leases dropped since its last wake-up: close's cleanup releases them
    held = renewer.held_leases()
    if not held:
        return
    try:
        yield Call(client._release_renewed, (held, deadline))
    except LockError as exc:
        log.warning("turbolock: close could not release %d renewed locks: %s", len(held), exc)


class CallsUnderWay:
    """The calls under way on a client, each counted until it ends (deque appends and pops need
    no lock between threads): what its close() lets end before it closes the connections they
    need (a Redis Cluster call's redirect to another master, a Redlock call's bookkeeping).
    Calls count themselves in, inline on the hot paths, or through ``counted``."""

    __slots__ = ("entries", "closing")

    def __init__(self, closing: bool = False) -> None:
        self.entries: deque[None] = deque()
        self.closing = closing
        """Set by close() as it begins to wait: a single-lock call begun from then on is refused
        (a bulk call finds the client closed already). Not a step of a call under way: a bulk
        call giving back what it took, a claim releasing a part before it reads the map again."""

    def counted(self, flow: Flow[T]) -> Flow[T]:
        """``flow``, counted from its first step to its end."""
        entries = self.entries
        entries.append(None)
        try:
            return (yield from flow)
        finally:
            entries.pop()

    def ended_flow(self, deadline: float) -> Flow[None]:
        """close()'s: refuse new single-lock calls, and wait until no call is under way, or
        ``deadline``."""
        self.closing = True
        entries = self.entries
        while entries and time.monotonic() < deadline:
            yield Sleep(CLOSE_POLL)
