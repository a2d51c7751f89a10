"""Waiting between acquire attempts: capped exponential backoff with full jitter.

Full jitter (a uniform draw up to the current cap) spreads contending workers apart
instead of having them retry in lockstep, and never sleeps past the caller's deadline.
"""

from __future__ import annotations

import random


class Backoff:
    __slots__ = ("initial", "maximum", "multiplier", "floor", "_ceiling", "_random")

    def __init__(self, initial: float = 0.002, maximum: float = 0.2, multiplier: float = 2.0,
                 floor: float = 0.0) -> None:
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.floor = floor
        """The least share of the ceiling a delay is (0: full jitter)."""
        self._ceiling = initial
        self._random = random.random

    def next_delay(self, remaining: float | None) -> float:
        """The next sleep: uniform in [0, ceiling], the ceiling doubling up to ``maximum``,
        and never more than ``remaining`` seconds (None: no deadline)."""
        floor = self.floor
        delay = self._ceiling * (floor + (1.0 - floor) * self._random())
        self._ceiling = min(self.maximum, self._ceiling * self.multiplier)
        if remaining is not None:
            delay = min(delay, max(0.0, remaining))
        return delay
