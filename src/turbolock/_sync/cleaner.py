"""The threaded client's background releases of maybe-held locks (see ``_cleanup_book``).

A thread runs while anything is pending: it releases everything pending in one pipelined call
with the client's call deadline, waits a little while the server does not answer, and ends once
nothing is left (or everything left has expired). No client call ever waits for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from turbolock._flows.cleanup_book import CleanupBook, retry_delay
from turbolock.errors import LockError

log = logging.getLogger("turbolock")

Release = Callable[[list[bytes], list[bytes], float], Sequence[object]]
"""Compare-and-delete of keys with their tokens before a deadline: a reply per key."""


class BackgroundCleaner:
    def __init__(self, book: CleanupBook, release: Release, timeout: float) -> None:
        self.book = book
        self._release = release
        self._timeout = timeout
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def wake(self) -> None:
        """Something was remembered: make sure the thread runs."""
        with self._lock:
            if self._stopping:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="turbolock-cleanup", daemon=True)
                self._thread.start()
        self._wakeup.set()

    def stop(self, deadline: float) -> None:
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wakeup.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))

    def forget_after_fork(self) -> None:
        """In a forked child: no thread runs here; one stopping in the parent (its client's close
        under way) is the parent's."""
        self._stopping = False
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._thread = None

    def run_once(self, deadline: float) -> bool:
        """Release what is pending, before ``deadline``; True when nothing is left."""
        entries = self.book.take()
        if not entries:
            return not self.book  # rechecks not due yet: the thread waits for them
        replies: Sequence[object] | None = None
        try:
            replies = self._release([e[0] for e in entries], [e[1] for e in entries], deadline)
        except LockError as exc:
            log.debug("turbolock: release of %d maybe-held locks failed: %s", len(entries), exc)
        finally:  # an interrupt too: entries left "on their way" would hold back their tokens' attempts
            self.book.settle(entries, replies)
        return not self.book

    def _run(self) -> None:
        delay: float | None = None
        while True:
            self._wakeup.clear()
            if self._stopping:
                break
            if self.run_once(time.monotonic() + self._timeout):
                delay = None
                with self._lock:  # a wake() after this sees no thread and starts one
                    if not self.book or self._stopping:
                        self._thread = None
                        return
                continue
            delay = retry_delay(delay)
            expiry = self.book.next_expiry()
            if expiry is not None:
                delay = min(delay, max(0.0, expiry - time.monotonic()))
            self._wakeup.wait(delay)
        with self._lock:
            self._thread = None
