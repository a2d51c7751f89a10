"""Asking several nodes in turn for one answer (the Sentinels for the master, the start-up nodes
for a Redis Cluster's map) within one call's deadline."""

from __future__ import annotations

import time


def turn_deadline(deadline: float, position: int, count: int) -> float:
    """The deadline of the node asked at ``position`` of ``count``: half the time left (the last
    one: all of it), so one that hangs (a stopped process, a host that drops packets) leaves the
    others time, and one that is only slow, most."""
    if position >= count - 1:
        return deadline
    now = time.monotonic()
    return min(deadline, now + (deadline - now) / 2)
