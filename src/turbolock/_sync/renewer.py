"""Auto-renewal: one background thread and one timer wheel renew every held lock of a client.

Due locks are renewed in batches, one EVALSHA per chunk of up to ``RENEW_CHUNK`` keys (a single
script over 100k keys would block the server for about half a second). Each lock ends every
renewal in one of three ways: renewed; lost (the key is gone or holds another token); or
indeterminate (transport error, timeout, error reply), retried until shortly before the lock's
local safe-until, then lost. Safe-until is ``sent_at + ttl`` of the renewal that succeeded
(the earliest of any that overlapped it), with ``sent_at`` taken before the command was
written, so it can only err on the safe side. A round never waits past its leases' expiry.

A lost lock is always signalled, no later than its own expiry: ``lease.lost`` is set,
``on_lost(lease)`` is called on the renewer thread (its exceptions are logged), and
``lease.ensure_held()`` raises. ``on_lost`` is a notification; ``ensure_held()`` is the check
to make before acting on what the lock protects. The bookkeeping is ``_renewal_book``'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from turbolock._flows.renewal_book import (
    CLOSED_DURING_ACQUIRE,
    AutoRenew,
    OnLost,
    RenewalBook,
    RenewalState,
)
from turbolock._flows.renewal_round import (
    call_on_lost,
    due_round_flow,
    lose_together,
    lose_unrenewed,
    renew_round_flow,
    take_due,
)
from turbolock._sync.drive import run
from turbolock.errors import ClientClosedError
from turbolock.lease import Lease

log = logging.getLogger("turbolock.renewal")


class Renewer:
    """The renewal thread of one client; started on the first auto-renewed lease."""

    lead = 0.0
    """How much earlier than due a round starts (the asyncio renewer's, on a busy loop; a thread
    of its own needs none)."""

    def __init__(self, client: Any, book: RenewalBook | None = None) -> None:
        self._client = client
        self.book = RenewalBook(client.core, time.monotonic()) if book is None else book
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None
        self._state_lock = threading.Lock()
        self._stopping = False

    def __len__(self) -> int:
        return len(self.book)

    def add(self, leases: Iterable[Lease], policy: AutoRenew, on_lost: OnLost | None) -> None:
        with self._state_lock:
            if self._stopping:
                raise ClientClosedError(CLOSED_DURING_ACQUIRE)
            self.book.add(leases, policy, on_lost)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="turbolock-renewer", daemon=True)
                self._thread.start()
        self._wakeup.set()

    def remove(self, leases: Iterable[Lease]) -> None:
        """Stop renewing (the lease is being released); a renewal in flight is then ignored."""
        self.book.remove(leases)

    def rescheduled(self, lease: Lease) -> None:
        self.book.rescheduled(lease)

    def held_leases(self) -> list[Lease]:
        return self.book.held_leases()

    def stop(self, deadline: float | None = None) -> None:
        """Stop the thread; wait for a round in flight to end, until ``deadline`` at most."""
        with self._state_lock:
            self._stopping = True
        self._wakeup.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's locks are not ours to renew; no thread runs here (nor
        stops: a close under way in the parent is the parent's)."""
        self._stopping = False
        self._state_lock = threading.Lock()
        self.book.forget_after_fork(time.monotonic())
        self._thread = None
        self._wakeup = threading.Event()

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        book = self.book
        while not self._stopping:
            self._round()  # in a call of its own: no lease stays referenced between rounds
            self._wakeup.wait(book.poll if len(book) else None)
            self._wakeup.clear()

    def _round(self) -> None:
        to_send = take_due(self)
        if to_send:
            run(due_round_flow(self, to_send))

    def _release_dropped(self) -> None:
        for state in self.book.take_collected():
            self._client._abandoned(state.key, state.token, time.monotonic() + state.ttl_ms / 1000.0)

    def _send(self, leases: list[Lease]) -> None:
        run(renew_round_flow(self._client, self, leases))

    def _failed(self, batch: list[Lease], sent_at: float | None, sent: bool = True) -> None:
        now = time.monotonic()
        lose_unrenewed(self, self._client, self.book.failed(batch, sent_at, now, sent), now)

    def _lost(self, lease: Lease, reason: str) -> None:
        lose_together(self, [(lease, reason)])

    def _signal(self, lease: Lease, state: RenewalState) -> None:
        """A lease just marked lost: its ``on_lost``, if any."""
        on_lost = lease._on_lost()
        if on_lost is None:
            return
        try:
            call_on_lost(on_lost, lease)
        except SystemExit:  # this thread's end, not the program's: the renewer must go on
            log.error("turbolock: on_lost callback for lock %r called sys.exit(), which ends only the "
                      "thread it runs on, the client's renewer: ignored, renewal goes on. To end the "
                      "program, signal its main thread (or os._exit)", lease.name)

