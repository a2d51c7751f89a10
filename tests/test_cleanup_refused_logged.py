"""A background release of a maybe-held lock that the server refuses with an error (an ACL user
refused a command the release script runs: NOPERM) is logged once per error code, and retried
until the lock's ttl has surely ended. It was resent in silence: ``pending_cleanup`` stuck and
nothing in the log said why. Found in review. (The book is sans-IO: both front ends settle
their background releases through it.)"""

from __future__ import annotations

import logging
import time

import pytest

from turbolock._flows.cleanup_book import CleanupBook
from turbolock.errors import ReplyError


def test_a_refused_background_release_is_logged_once_per_code(caplog: pytest.LogCaptureFixture) -> None:
    book = CleanupBook()
    book.remember(b"k", b"token-1", time.monotonic() + 30)
    refusal = ReplyError("NOPERM User locker has no permissions to run the 'del' command")
    with caplog.at_level(logging.WARNING, logger="turbolock"):
        for _ in range(3):
            book.settle(book.take(), [refusal])
        book.settle(book.take(), [ReplyError("OOM command not allowed when used memory > 'maxmemory'.")])
    assert len(book) == 1  # still owed: retried until its ttl has surely ended
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2 and "NOPERM" in lines[0] and "OOM" in lines[1], lines
    assert "token-1" not in " ".join(lines)
