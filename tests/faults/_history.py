"""What a fault run records, every time on ``time.monotonic()``: CLOCK_MONOTONIC is one clock for
every process on a Linux host, so the records of all the workers can be compared directly.

Named tuples: they cross process boundaries pickled, and the checker's tests build them by hand.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Call(NamedTuple):
    """One public call: ``outcome`` is "ok", "timeout" (a wait that ended without the lock),
    "not-owned" (a release that found the lock gone) or the name of the exception raised.
    ``queued``: seconds the worker's threads spent ready to run but waiting for a CPU during the
    call (the kernel's run-queue wait, ``/proc/self/task/*/schedstat``)."""

    worker: int
    op: str
    lock: str
    start: float
    end: float
    deadline: float
    outcome: str
    queued: float = 0.0


# What became of a critical section's write.
ACKED = "acked"
"""The resource applied it."""
REFUSED = "refused"
"""A fenced resource refused it (a newer fence had touched the value)."""
SKIPPED = "skipped"
"""Never sent: the holder's check said the lock was no longer safely held."""


class Section(NamedTuple):
    """One critical section: the lease as the holder saw it, and what it did with the resource.

    ``expires_at`` is the holder's belief at its check (``lease.expires_at``); ``read_end`` and
    ``write_start`` bound the part of the section that certainly ran on the resource server
    between the read and the write. ``lost_at``/``lost_expiry``: when ``on_lost`` fired and the
    lease's believed expiry then (renewed leases). ``released_at``/``expiry_at_release``: when
    the holder let go and what it believed just before.
    """

    worker: int
    lock: str
    renewed: bool
    fence: int | None
    acquired_at: float
    expires_at: float
    read_start: float
    read_end: float
    value_read: int | None
    check_at: float
    write_start: float | None
    write_end: float | None
    write: str
    lost_at: float | None
    lost_expiry: float | None
    released_at: float
    expiry_at_release: float


class Pause(NamedTuple):
    """A worker process stopped (SIGSTOP) from ``start`` to ``end``: its own calls and signals
    cannot keep time across it."""

    worker: int
    start: float
    end: float


class History(NamedTuple):
    calls: list[Call]
    sections: list[Section]
    pauses: list[Pause]
    finals: dict[str, int]
    """The counter of each lock on the resource server once the workers stopped."""
    keys_left: list[str]
    """Lock keys still on the lock servers 3 ttls after the workers stopped."""


def merge(reports: list[dict[str, Any]], finals: dict[str, int], keys_left: list[str]) -> History:
    """The workers' reports (each a dict of its calls, sections and pauses) as one history."""
    return History([call for report in reports for call in report["calls"]],
                   [section for report in reports for section in report["sections"]],
                   [pause for report in reports for pause in report["pauses"]], finals, keys_left)
