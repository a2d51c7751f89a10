"""The checker: pure functions over a recorded ``History`` that find what the lock promised and
did not keep. Each returns the offending records, so a failure can show them.

Every comparison between processes uses points that are certain whatever the scheduler did: a
read had run on the resource server by the time ``read_end`` was taken, and a write had not
run before ``write_start``. So two sections whose ``[read_end, write_start]`` intervals overlap
certainly overlapped on the resource server too, however late either process ran.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ._history import ACKED, Call, History, Pause, Section

SLACK = 0.05
"""What a call may take past its deadline, and a loss signal past the lease's expiry."""

OVERLAP = "overlap"
LOST_UPDATE = "lost update"
LATE_WRITE = "late write"
STALE_WRITE = "stale write accepted"
OVER_DEADLINE = "call over deadline"
UNSIGNALLED = "loss never signalled"
LATE_SIGNAL = "loss signalled late"
KEY_LEFT = "key left"
KINDS = (OVERLAP, LOST_UPDATE, LATE_WRITE, STALE_WRITE, OVER_DEADLINE, UNSIGNALLED, LATE_SIGNAL, KEY_LEFT)


def overlaps(sections: Iterable[Section]) -> list[tuple[Section, Section]]:
    """Pairs of sections of one lock, both of whose writes were applied, that were on the
    resource at the same time."""
    applied = sorted((s for s in sections if s.write == ACKED), key=lambda s: s.read_end)
    found: list[tuple[Section, Section]] = []
    for i, first in enumerate(applied):
        assert first.write_start is not None
        for second in applied[i + 1:]:
            if second.read_end >= first.write_start:
                break  # sorted by read_end: no later section can start before first's write
            assert second.write_start is not None
            if second.lock == first.lock and first.read_end < second.write_start:
                found.append((first, second))
    return found


def lost_updates(sections: Iterable[Section], finals: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Locks whose counter does not equal the number of increments the resource acknowledged:
    ``{lock: (acknowledged, final)}``. Fewer is a lost update; more, a write nobody recorded."""
    acked = Counter(s.lock for s in sections if s.write == ACKED)
    return {lock: (acked[lock], finals.get(lock, 0)) for lock in sorted(set(acked) | set(finals))
            if acked[lock] != finals.get(lock, 0)}


def late_writes(sections: Iterable[Section]) -> list[Section]:
    """Applied writes sent after the holder's own belief had expired, to a resource that cannot
    tell (an unfenced one: for a fenced one ``stale_writes`` says whether it should have refused)."""
    return [s for s in sections if s.write == ACKED and s.fence is None and s.write_start is not None
            and s.write_start > s.expires_at]


def stale_writes(sections: Sequence[Section]) -> list[tuple[Section, Section]]:
    """Fenced writes the resource applied although a section with a newer fence had read the
    value before: ``(the stale write, the newer reader)``."""
    fenced = [s for s in sections if s.fence is not None]
    found: list[tuple[Section, Section]] = []
    for write in fenced:
        if write.write != ACKED or write.write_start is None:
            continue
        for newer in fenced:
            assert newer.fence is not None and write.fence is not None
            if (newer.lock == write.lock and newer.fence > write.fence and newer.value_read is not None
                    and newer.read_end < write.write_start):
                found.append((write, newer))
                break
    return found


def _paused(pauses: Iterable[Pause], worker: int, start: float, end: float) -> bool:
    """Whether ``worker`` was stopped at some point between ``start`` and ``end``."""
    return any(p.worker == worker and p.start < end and p.end > start for p in pauses)


def overdue_calls(calls: Iterable[Call], pauses: Sequence[Pause], slack: float = SLACK) -> list[Call]:
    """Calls that returned later than their deadline plus ``slack``. Nothing runs in a process
    that is stopped, nor in threads the kernel leaves waiting for a CPU: a call that spans its
    own worker's pause is excused, and one may be late by as long as its worker's threads waited
    in the run queue during it (a loaded machine's doing, not the library's)."""
    return [c for c in calls if c.end > c.deadline + slack + c.queued
            and not _paused(pauses, c.worker, c.start, c.end)]


def starved_calls(calls: Iterable[Call], slack: float = SLACK) -> list[Call]:
    """Calls past their deadline plus ``slack`` that ``overdue_calls`` excuses for their
    run-queue wait alone: reported beside the verdict, so the excuse stays visible."""
    return [c for c in calls if c.deadline + slack < c.end <= c.deadline + slack + c.queued]


def unsignalled_losses(sections: Iterable[Section], pauses: Sequence[Pause],
                       slack: float = SLACK) -> list[Section]:
    """Renewed leases the holder still had past their believed expiry (so renewal had stopped
    keeping them) with no loss signalled."""
    return [s for s in sections
            if s.renewed and s.lost_at is None and s.released_at > s.expiry_at_release + slack
            and not _paused(pauses, s.worker, s.expiry_at_release, s.released_at)]


def late_signals(sections: Iterable[Section], pauses: Sequence[Pause], slack: float = SLACK) -> list[Section]:
    """Losses signalled later than the lease's believed expiry plus ``slack``."""
    return [s for s in sections
            if s.lost_at is not None and s.lost_expiry is not None and s.lost_at > s.lost_expiry + slack
            and not _paused(pauses, s.worker, s.lost_expiry, s.lost_at)]


class Findings(NamedTuple):
    """How many of each kind of violation, and a few examples of each for the failure message."""

    counts: dict[str, int]
    examples: dict[str, list[str]]

    def count(self, kind: str) -> int:
        return self.counts.get(kind, 0)

    def total(self) -> int:
        return sum(self.counts.values())

    def describe(self) -> str:
        found = [f"{kind}: {n}" for kind, n in self.counts.items() if n]
        return ", ".join(found) if found else "none"

    def details(self) -> str:
        return "\n".join(f"{kind} ({self.counts[kind]}):\n  " + "\n  ".join(rows)
                         for kind, rows in self.examples.items() if rows)


EXAMPLES = 3


def check(history: History, slack: float = SLACK) -> Findings:
    """Every check over one history."""
    pauses = history.pauses
    lost = lost_updates(history.sections, history.finals)
    found: dict[str, list[object]] = {
        OVERLAP: list(overlaps(history.sections)),
        LATE_WRITE: list(late_writes(history.sections)),
        STALE_WRITE: list(stale_writes(history.sections)),
        OVER_DEADLINE: list(overdue_calls(history.calls, pauses, slack)),
        UNSIGNALLED: list(unsignalled_losses(history.sections, pauses, slack)),
        LATE_SIGNAL: list(late_signals(history.sections, pauses, slack)),
        KEY_LEFT: list(history.keys_left),
    }
    counts = {kind: len(rows) for kind, rows in found.items()}
    counts[LOST_UPDATE] = sum(abs(acked - final) for acked, final in lost.values())
    examples = {kind: [repr(row) for row in rows[:EXAMPLES]] for kind, rows in found.items()}
    examples[LOST_UPDATE] = [f"{lock}: {acked} increments acknowledged, counter {final}"
                             for lock, (acked, final) in lost.items()]
    return Findings({kind: counts[kind] for kind in KINDS}, {kind: examples[kind] for kind in KINDS})
