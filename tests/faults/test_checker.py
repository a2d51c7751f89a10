"""The checker on hand-built histories: each check finds what it must, and nothing in a history
that only looks close to a violation (sections that touch but do not overlap, a call just
within its slack, a lateness covered by the worker's own pause...)."""

from __future__ import annotations

from typing import Any

from ._checker import (
    KEY_LEFT,
    KINDS,
    LATE_SIGNAL,
    LATE_WRITE,
    LOST_UPDATE,
    OVER_DEADLINE,
    OVERLAP,
    STALE_WRITE,
    UNSIGNALLED,
    check,
    late_signals,
    late_writes,
    lost_updates,
    overdue_calls,
    overlaps,
    stale_writes,
    starved_calls,
    unsignalled_losses,
)
from ._history import ACKED, REFUSED, SKIPPED, Call, History, Pause, Section


def section(worker: int, read_end: float, write_start: float | None, *, lock: str = "a",
            write: str = ACKED, expires_at: float = 100.0, fence: int | None = None,
            value_read: int | None = 0, renewed: bool = False, lost_at: float | None = None,
            lost_expiry: float | None = None, released_at: float | None = None,
            expiry_at_release: float | None = None) -> Section:
    """A section whose read ended at ``read_end`` and whose write started at ``write_start``;
    the other times follow from those two."""
    end = write_start if write_start is not None else read_end
    return Section(worker=worker, lock=lock, renewed=renewed, fence=fence, acquired_at=read_end - 0.002,
                   expires_at=expires_at, read_start=read_end - 0.001, read_end=read_end,
                   value_read=value_read, check_at=end, write_start=write_start,
                   write_end=None if write_start is None else write_start + 0.001, write=write,
                   lost_at=lost_at, lost_expiry=lost_expiry,
                   released_at=end + 0.002 if released_at is None else released_at,
                   expiry_at_release=expires_at if expiry_at_release is None else expiry_at_release)


def call(worker: int, start: float, end: float, deadline: float, queued: float = 0.0) -> Call:
    return Call(worker, "acquire", "a", start, end, deadline, "ok", queued)


def history(**fields: Any) -> History:
    return History(**{"calls": [], "sections": [], "pauses": [], "finals": {}, "keys_left": [], **fields})


# -- overlapping sections -----------------------------------------------------------------------


def test_sections_one_after_the_other_do_not_overlap() -> None:
    serial = [section(0, 1.0, 1.1), section(1, 1.2, 1.3), section(0, 1.4, 1.5)]
    assert overlaps(serial) == []


def test_a_read_before_anothers_write_overlaps() -> None:
    first, second = section(0, 1.0, 1.2), section(1, 1.1, 1.3)
    assert overlaps([second, first]) == [(first, second)]


def test_a_section_inside_another_overlaps() -> None:
    outer, inner = section(0, 1.0, 2.0), section(1, 1.2, 1.3)
    assert overlaps([outer, inner]) == [(outer, inner)]


def test_touching_is_not_overlapping() -> None:
    """The second read ends exactly when the first write starts: not certainly concurrent."""
    assert overlaps([section(0, 1.0, 1.2), section(1, 1.2, 1.3)]) == []


def test_sections_of_different_locks_never_overlap() -> None:
    assert overlaps([section(0, 1.0, 1.2), section(1, 1.1, 1.3, lock="b")]) == []


def test_writes_not_applied_are_not_overlaps() -> None:
    """A refused or skipped write changed nothing on the resource."""
    for write in (REFUSED, SKIPPED):
        assert overlaps([section(0, 1.0, 1.2, write=write), section(1, 1.1, 1.3)]) == []


def test_every_overlapping_pair_is_found() -> None:
    paused = section(0, 1.0, 5.0)
    during = [section(i, 1.0 + i, 1.5 + i) for i in range(1, 4)]
    assert overlaps([paused, *during]) == [(paused, s) for s in during]


# -- lost updates -------------------------------------------------------------------------------


def test_a_counter_equal_to_the_acknowledged_increments_lost_none() -> None:
    sections = [section(0, 1.0, 1.1), section(1, 1.2, 1.3), section(2, 1.4, 1.5, write=REFUSED)]
    assert lost_updates(sections, {"a": 2}) == {}


def test_a_counter_behind_the_acknowledged_increments_lost_some() -> None:
    sections = [section(0, 1.0, 1.1), section(1, 1.2, 1.3), section(2, 1.4, 1.5, lock="b")]
    assert lost_updates(sections, {"a": 1, "b": 1}) == {"a": (2, 1)}


def test_a_counter_ahead_of_the_acknowledged_increments_is_reported_too() -> None:
    assert lost_updates([section(0, 1.0, 1.1)], {"a": 3}) == {"a": (1, 3)}


def test_a_counter_never_written_is_zero() -> None:
    assert lost_updates([section(0, 1.0, 1.1)], {}) == {"a": (1, 0)}
    assert lost_updates([section(0, 1.0, None, write=SKIPPED)], {}) == {}


# -- writes after the holder's own belief expired -----------------------------------------------


def test_a_write_after_the_belief_expired_is_late() -> None:
    late = section(0, 1.0, 1.5, expires_at=1.4)
    assert late_writes([late, section(1, 2.0, 2.1, expires_at=2.2)]) == [late]


def test_a_skipped_or_refused_late_write_is_not_reported() -> None:
    assert late_writes([section(0, 1.0, 1.5, expires_at=1.4, write=REFUSED),
                        section(1, 1.0, None, expires_at=0.5, write=SKIPPED)]) == []


def test_a_fenced_late_write_is_left_to_the_stale_write_check() -> None:
    """A fenced resource that applied a late write nobody had overtaken lost nothing."""
    late = section(0, 1.0, 1.5, expires_at=1.4, fence=3)
    assert late_writes([late]) == []
    assert stale_writes([late]) == []


# -- stale writes a fenced resource applied -----------------------------------------------------


def test_a_fenced_write_after_a_newer_read_is_stale() -> None:
    stale = section(0, 1.0, 2.0, fence=3)
    newer = section(1, 1.5, 1.6, fence=4)
    assert stale_writes([stale, newer]) == [(stale, newer)]


def test_refused_late_writes_and_older_readers_are_not_stale() -> None:
    refused = section(0, 1.0, 2.0, fence=3, write=REFUSED)
    newer = section(1, 1.5, 1.6, fence=4)
    after = section(2, 2.5, 2.6, fence=5)  # read after the write it is newer than
    older_reader = section(3, 0.5, 0.6, fence=2)
    assert stale_writes([refused, newer, after, older_reader]) == []


def test_a_newer_reader_whose_read_was_refused_does_not_make_a_write_stale() -> None:
    write = section(0, 1.0, 2.0, fence=3)
    refused_reader = section(1, 1.5, None, fence=4, value_read=None, write=SKIPPED)
    assert stale_writes([write, refused_reader]) == []


# -- calls over their deadline ------------------------------------------------------------------


def test_a_call_past_its_deadline_and_slack_is_overdue() -> None:
    over = call(0, 1.0, 1.56, 1.5)
    assert overdue_calls([over, call(1, 1.0, 1.54, 1.5), call(2, 1.0, 1.2, 1.5)], []) == [over]


def test_a_call_late_by_no_more_than_its_run_queue_wait_is_excused() -> None:
    starved = call(0, 1.0, 1.6, 1.5, queued=0.06)
    late = call(1, 1.0, 1.6, 1.5, queued=0.04)
    assert overdue_calls([starved, late], []) == [late]
    assert starved_calls([starved, late, call(2, 1.0, 1.2, 1.5, queued=0.3)]) == [starved]


def test_a_call_that_spans_its_own_workers_pause_is_excused() -> None:
    over = call(0, 1.0, 3.0, 1.5)
    assert overdue_calls([over], [Pause(0, 1.2, 2.8)]) == []
    assert overdue_calls([over], [Pause(1, 1.2, 2.8)]) == [over], "another worker's pause excuses nothing"
    assert overdue_calls([over], [Pause(0, 3.5, 4.0)]) == [over], "a pause after the call excuses nothing"


# -- losses of renewed locks --------------------------------------------------------------------


def test_a_renewed_lease_held_past_its_expiry_without_a_signal_is_unsignalled() -> None:
    silent = section(0, 1.0, None, write=SKIPPED, renewed=True, released_at=2.0, expiry_at_release=1.5)
    signalled = silent._replace(lost_at=1.4, lost_expiry=1.5)
    kept = silent._replace(expiry_at_release=2.3)  # renewal kept it: released before its expiry
    unrenewed = silent._replace(renewed=False)  # no promise: nobody watches it
    assert unsignalled_losses([silent, signalled, kept, unrenewed], []) == [silent]
    assert unsignalled_losses([silent], [Pause(0, 1.4, 1.9)]) == []


def test_a_loss_signalled_after_the_lease_expired_is_late() -> None:
    late = section(0, 1.0, None, write=SKIPPED, renewed=True, lost_at=1.6, lost_expiry=1.5)
    in_time = late._replace(lost_at=1.45)
    within_slack = late._replace(lost_at=1.54)
    assert late_signals([late, in_time, within_slack], []) == [late]
    assert late_signals([late], [Pause(0, 1.45, 1.58)]) == []


# -- the whole check ----------------------------------------------------------------------------


def test_a_clean_history_has_no_findings() -> None:
    clean = history(calls=[call(0, 1.0, 1.1, 1.5)], sections=[section(0, 1.0, 1.1), section(1, 1.2, 1.3)],
                    finals={"a": 2})
    findings = check(clean)
    assert findings.total() == 0 and findings.describe() == "none"
    assert set(findings.counts) == set(KINDS)


def test_every_kind_is_counted() -> None:
    broken = history(
        calls=[call(0, 1.0, 2.0, 1.5)],
        sections=[section(0, 1.0, 1.5, fence=1), section(1, 1.1, 1.2, fence=2),
                  section(4, 6.0, 6.5, lock="b", expires_at=6.4),
                  section(2, 3.0, None, write=SKIPPED, renewed=True, released_at=4.0, expiry_at_release=3.5),
                  section(3, 5.0, None, write=SKIPPED, renewed=True, lost_at=5.9, lost_expiry=5.5)],
        finals={"a": 1, "b": 1},
        keys_left=["f:a"],
    )
    findings = check(broken)
    assert findings.counts == {OVERLAP: 1, LOST_UPDATE: 1, LATE_WRITE: 1, STALE_WRITE: 1, OVER_DEADLINE: 1,
                               UNSIGNALLED: 1, LATE_SIGNAL: 1, KEY_LEFT: 1}
    assert "2 increments acknowledged, counter 1" in findings.details()
