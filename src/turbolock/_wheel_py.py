"""A hashed timer wheel of integer ids: schedule and cancel in O(1), advance(now) -> the ids due.

Pure-Python twin of the compiled ``TimerWheel``; both are exported by their core module. Times
are floats on the caller's clock (the renewer uses ``time.monotonic()``). An id is due once its
time is at or before ``now``; it fires at the first ``advance`` whose tick covers it, so no id
ever fires early, and none more than one tick late.
"""

from __future__ import annotations

import math


class TimerWheel:
    __slots__ = ("tick", "_slots", "_mask", "_where", "_current", "_count")

    def __init__(self, tick: float, slots: int, now: float) -> None:
        if not (tick > 0 and math.isfinite(tick)):
            raise ValueError("tick must be a positive, finite number of seconds")
        if slots < 1 or slots & (slots - 1):
            raise ValueError("slots must be a positive power of two")
        self.tick = tick
        # Each slot maps id -> the absolute tick it is due at; entries a full turn or more away
        # stay in their slot until their tick comes round.
        self._slots: list[dict[int, int]] = [{} for _ in range(slots)]
        self._mask = slots - 1
        self._where: dict[int, int] = {}
        self._current = math.floor(now / tick)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._where

    def schedule(self, item_id: int, when: float) -> None:
        """Make ``item_id`` due at ``when`` (replacing any earlier schedule of the same id)."""
        due = math.ceil(when / self.tick)
        if due <= self._current:
            due = self._current + 1
        where = self._where
        old = where.get(item_id)
        if old is not None:
            del self._slots[old & self._mask][item_id]
        else:
            self._count += 1
        self._slots[due & self._mask][item_id] = due
        where[item_id] = due

    def cancel(self, item_id: int) -> bool:
        """Unschedule ``item_id``; False when it was not scheduled."""
        due = self._where.pop(item_id, None)
        if due is None:
            return False
        del self._slots[due & self._mask][item_id]
        self._count -= 1
        return True

    def advance(self, now: float) -> list[int]:
        """Every id due at or before ``now``, sorted by (due tick, id); they are unscheduled."""
        target = math.floor(now / self.tick)
        if target <= self._current or not self._count:
            self._current = max(self._current, target)
            return []
        slots = self._slots
        where = self._where
        mask = self._mask
        fired: list[tuple[int, int]] = []
        # A jump longer than one turn visits every slot once, not every tick in between.
        first = self._current + 1 if target - self._current <= mask + 1 else target - mask
        for tick_no in range(first, target + 1):
            slot = slots[tick_no & mask]
            if slot:
                fired.extend((due, item) for item, due in slot.items() if due <= target)
        for _, item in fired:
            del slots[where.pop(item) & mask][item]
        self._count -= len(fired)
        self._current = target
        fired.sort()
        return [item for _, item in fired]

    def next_due(self) -> float | None:
        """The earliest time anything is due, or None when empty (O(n); for idle waits only)."""
        if not self._where:
            return None
        return min(self._where.values()) * self.tick
