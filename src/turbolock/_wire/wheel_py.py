"""A hashed timer wheel of integer ids: schedule and cancel in O(1), advance(now) -> the ids due.

Pure-Python twin of the compiled ``TimerWheel`` (``ext/wheel.pyx``); both are exported by their
core module and agree exactly, errors included. Times are floats on the caller's clock (the
renewer uses ``time.monotonic()``).

Time is cut into ticks: tick ``k`` is every ``t`` with ``floor(t / tick) == k`` (the division
as floats). ``advance(now)`` processes every tick up to ``now``'s and returns the ids whose due
tick it reached, so an id never fires before its time, and any ``advance`` at ``when + tick``
or later fires it (at most one tick late). An id scheduled at a time the wheel has already
passed fires at the very next ``advance``.
"""

from __future__ import annotations

import math
import operator
from math import ceil, floor, inf, nextafter

# Ticks are kept as exact integers within this distance of 0 (the compiled wheel uses int64).
_TICK_LIMIT = float(2**53)
_MAX_ID = 2**63 - 1
_MAX_SLOTS = 2**20


def _seconds(value: object) -> float:
    """``value`` as a float, converted (and refused) exactly as C's ``PyFloat_AsDouble`` does."""
    math.isfinite(value)  # type: ignore[arg-type]  # raises the TypeError PyFloat_AsDouble raises
    return float(value)  # type: ignore[arg-type]


def _checked_id(item_id: object) -> int:
    if not isinstance(item_id, int):
        raise TypeError(f"item_id must be an int, not {type(item_id).__name__}")
    if not 0 < item_id <= _MAX_ID:
        raise ValueError("item_id must be between 1 and 2**63 - 1")
    return int(item_id)  # a bool or IntEnum id is stored as the plain int it equals


def _out_of_range(name: str) -> ValueError:
    return ValueError(f"{name} must be finite and within 2**53 ticks of 0")


def _due_tick(when: float, tick: float) -> int:
    """The first tick whose every time is at or after ``when``.

    ``ceil(when / tick)``, except where the division rounds to a whole number k while a time
    below ``when`` also divides to k: tick k then holds times before ``when``, so it is k + 1.
    (Near monotonic() ~ 1e6 with a 10 ms tick: 1000000.0700000001 and 1000000.07 both divide
    to exactly 100000007.0, and the plain ceil fired the first at the second.)
    """
    q = when / tick
    if not -_TICK_LIMIT < q < _TICK_LIMIT:
        raise _out_of_range("when")
    due = ceil(q)
    if due == q and nextafter(when, -inf) / tick >= q:
        due += 1
    return due


class TimerWheel:
    __slots__ = ("_tick", "_slots", "_mask", "_where", "_overdue", "_current")

    def __init__(self, tick: float, slots: int, now: float) -> None:
        tick = _seconds(tick)
        if not (tick > 0 and math.isfinite(tick)):
            raise ValueError("tick must be a positive, finite number of seconds")
        slots = operator.index(slots)
        if slots < 1 or slots & (slots - 1):
            raise ValueError("slots must be a positive power of two")
        if slots > _MAX_SLOTS:
            raise ValueError("slots must be at most 2**20")
        self._tick = tick
        # Each slot maps id -> the tick it is due at; entries a full turn or more away stay in
        # their slot until their tick comes round.
        self._slots: list[dict[int, int]] = [{} for _ in range(slots)]
        self._mask = slots - 1
        # Every scheduled id -> its due tick. Due ticks at or before _current (the last tick
        # processed) are in _overdue, all others in their slot.
        self._where: dict[int, int] = {}
        self._overdue: dict[int, int] = {}
        q = _seconds(now) / self._tick
        if not -_TICK_LIMIT < q < _TICK_LIMIT:
            raise _out_of_range("now")
        self._current = floor(q)

    @property
    def tick(self) -> float:
        return self._tick

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, item_id: object) -> bool:
        return isinstance(item_id, int) and item_id in self._where

    def schedule(self, item_id: int, when: float) -> None:
        """Make ``item_id`` due at ``when`` (replacing any earlier schedule of the same id)."""
        # The renewers' hot path: the checks and _due_tick inlined, constants spelled out.
        if type(item_id) is not int or not 0 < item_id <= 9223372036854775807:
            item_id = _checked_id(item_id)
        tick = self._tick
        try:
            q = when / tick  # as PyFloat_AsDouble(when) / tick for any number
        except TypeError:
            when = _seconds(when)  # refused as the compiled wheel refuses it, or converted
            q = when / tick
        if not -9007199254740992.0 < q < 9007199254740992.0:  # 2**53
            raise _out_of_range("when")
        due = ceil(q)
        if due == q and nextafter(when, -inf) / tick >= q:
            due += 1
        current = self._current
        old = self._where.get(item_id)
        if old is not None:
            if old > current:
                del self._slots[old & self._mask][item_id]
            else:
                del self._overdue[item_id]
        if due > current:
            self._slots[due & self._mask][item_id] = due
        else:
            self._overdue[item_id] = due
        self._where[item_id] = due

    def cancel(self, item_id: int) -> bool:
        """Unschedule ``item_id``; False when it was not scheduled."""
        if type(item_id) is not int and not isinstance(item_id, int):
            return False
        due = self._where.pop(item_id, None)
        if due is None:
            return False
        if due > self._current:
            del self._slots[due & self._mask][item_id]
        else:
            del self._overdue[item_id]
        return True

    def advance(self, now: float) -> list[int]:
        """Every id due at or before ``now``, sorted by (due tick, id); they are unscheduled."""
        if type(now) is not float:
            now = _seconds(now)
        q = now / self._tick
        if not -_TICK_LIMIT < q < _TICK_LIMIT:
            raise _out_of_range("now")
        target = floor(q)
        current = self._current
        overdue = self._overdue
        fired = [(due, item) for item, due in overdue.items()] if overdue else []
        if target > current:
            self._current = target
            if len(self._where) > len(fired):
                slots = self._slots
                mask = self._mask
                # A jump longer than one turn visits every slot once, not every tick between.
                first = current + 1 if target - current <= mask + 1 else target - mask
                for tick_no in range(first, target + 1):
                    slot = slots[tick_no & mask]
                    if slot:
                        due_here = [(due, item) for item, due in slot.items() if due <= target]
                        if len(due_here) == len(slot):
                            slot.clear()
                        else:
                            for _, item in due_here:
                                del slot[item]
                        fired += due_here
        if not fired:
            return []
        overdue.clear()
        where = self._where
        for _, item in fired:
            del where[item]
        fired.sort()
        return [item for _, item in fired]

    def next_due(self) -> float | None:
        """The earliest time anything is due, or None when empty (O(n); for idle waits only)."""
        if not self._where:
            return None
        return min(self._where.values()) * self._tick
