"""Is a memory series flat? The least-squares slope of bytes over operations, after a warm-up."""

from __future__ import annotations

from dataclasses import dataclass

WARM_UP = 0.25
"""The fraction of the run left out: first connections, buffers grown to size, caches filled."""


@dataclass(frozen=True)
class Flatness:
    """One series' verdict: how much it grew after the warm-up, and how fast."""

    warm_up_ops: int
    growth: int
    """Bytes, last sample less the first after the warm-up."""
    slope: float
    """Bytes per 1000 operations, fitted over every sample after the warm-up."""
    limit: float
    """The largest slope that counts as flat, bytes per 1000 operations."""

    @property
    def flat(self) -> bool:
        return self.slope <= self.limit


def slope(ops: list[int], values: list[int]) -> float:
    """The least-squares slope of ``values`` over ``ops``, per 1000 operations."""
    n = len(ops)
    mean_x, mean_y = sum(ops) / n, sum(values) / n
    spread = sum((x - mean_x) ** 2 for x in ops)
    if spread == 0:
        raise ValueError("need samples at two or more operation counts")
    return 1000 * sum((x - mean_x) * (y - mean_y) for x, y in zip(ops, values, strict=True)) / spread


def flatness(ops: list[int], values: list[int], limit: float) -> Flatness:
    """The verdict on ``values`` (bytes, sampled after ``ops`` operations): flat when the slope after
    the warm-up is at most ``limit`` bytes per 1000 operations."""
    start = next(i for i, done in enumerate(ops) if done >= WARM_UP * ops[-1])
    kept_ops, kept = ops[start:], values[start:]
    if len(kept_ops) < 3:
        raise ValueError(f"only {len(kept_ops)} samples after the warm-up; need 3 or more")
    return Flatness(kept_ops[0], kept[-1] - kept[0], slope(kept_ops, kept), limit)
