"""A worker's record of its calls, sections and pauses, and the decisions both worker loops
(threaded and asyncio) share: which lock next, how long the work, when to pause, whether the
lease is still safely held."""

from __future__ import annotations

import os
import random
import time
from typing import Any

from turbolock import Lease, LockLostError

from ._history import Call, Pause, Section
from ._workload import Shape, Workload


def outcome(error: BaseException) -> str:
    return type(error).__name__


def run_queue_wait() -> float:
    """Seconds the threads of this process have spent so far ready to run but waiting for a
    CPU (0 where the kernel does not say). Every thread counts: one that waits while it holds
    the GIL holds up the others too."""
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat") as stat:
                total += int(stat.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total / 1e9


class Recorder:
    def __init__(self, index: int, workload: Workload, started: float) -> None:
        self.index = index
        self.workload = workload
        self.calls: list[Call] = []
        self.sections: list[Section] = []
        self.pauses: list[Pause] = []
        self._lost: dict[int, tuple[Lease, float, float]] = {}
        self._random = random.Random(workload.seed * 1000 + index)
        self._pauses = [started + offset for offset in workload.pauses.get(index, ())]

    # -- decisions -------------------------------------------------------------------------------

    def pick(self) -> Shape:
        """The next section's lock: the long one until the first worker has had one (so the
        loss-signal checks never pass for want of a renewed section), then at random."""
        short, long = self.workload.shapes
        if self.index == 0 and not any(section.renewed for section in self.sections):
            return long
        return long if self._random.random() < self.workload.long_share else short

    def work(self, shape: Shape) -> float:
        return self._random.uniform(*shape.work)

    def pauses_now(self, point: str, shape: Shape, held: bool = True) -> bool:
        """Whether to stop here: at the workload's pause point, in a short section, once for each
        of this worker's pause times now past (after the check: only in a section still held)."""
        if not self._pauses or self.workload.pause != point or shape.renewed or not held:
            return False
        if time.monotonic() < self._pauses[0]:
            return False
        self._pauses.pop(0)
        return True

    def holds(self, lease: Lease) -> bool:
        """The holder's check before it writes: the lease not lost and a margin left."""
        try:
            lease.ensure_held()
        except LockLostError:
            return False
        return lease.valid_for() >= self.workload.margin

    # -- records ---------------------------------------------------------------------------------

    def call(self, op: str, lock: str, start: float, budget: float, result: str, queued: float) -> None:
        """A call that began at ``start``, when the process's run-queue wait stood at ``queued``."""
        self.calls.append(Call(self.index, op, lock, start, time.monotonic(), start + budget, result,
                               max(0.0, run_queue_wait() - queued)))

    def paused(self, start: float) -> None:
        self.pauses.append(Pause(self.index, start, time.monotonic()))

    def on_lost(self, lease: Lease) -> None:
        """The leases' ``on_lost``: when the signal came, and the expiry the lease believed then."""
        self._lost[id(lease)] = (lease, time.monotonic(), lease.expires_at)  # the lease kept: no id reuse

    def lost(self, lease: Lease) -> tuple[float | None, float | None]:
        entry = self._lost.pop(id(lease), None)
        return (None, None) if entry is None else entry[1:]

    def section(self, **fields: Any) -> None:
        self.sections.append(Section(worker=self.index, **fields))

    def report(self, implementation: str, front: str) -> dict[str, Any]:
        return {"calls": self.calls, "sections": self.sections, "pauses": self.pauses,
                "implementation": implementation, "front": front}
