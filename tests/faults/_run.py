"""One fault run, start to findings: the workers start together, the fault runs in its window,
the workers stop, and 3 ttls later the lock servers are searched for keys left; then the
history is checked.

Timeline from the workers' start: ``WARMUP`` of normal work, the fault for ``duration``
(``SOAK`` times longer for a soak), then ``RECOVERY`` of normal work again.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from _pauses import Resumer
from scenarios._harness import CTX, Workers
from turbolock.redis_server import RedisServer

from ._checker import Findings, check, starved_calls
from ._faults import Fault, Window
from ._history import REFUSED, History, merge
from ._topology import Topology
from ._worker import START_LIMIT, worker
from ._workload import SOAK, Workload

WORKERS = int(os.environ.get("TURBOLOCK_FAULT_WORKERS", "8"))
WARMUP = 0.5
DURATION = 1.2
RECOVERY = 0.6
KEYS_AFTER = 3
"""Lock keys must be gone this many (longest) ttls after the workers stopped."""
RESULTS_LIMIT = 60.0
"""How long past their run the workers may take to report (a hang fails the test instead)."""


@dataclass
class Outcome:
    fault: str
    topology: str
    history: History
    findings: Findings
    implementations: list[str]
    fronts: list[str]
    window: tuple[float, float]
    """When the fault began and ended (monotonic)."""
    seed: int

    @property
    def sections(self) -> int:
        return len(self.history.sections)

    @property
    def refused(self) -> int:
        """Writes (or reads) a fenced resource refused."""
        return sum(1 for s in self.history.sections if s.write == REFUSED)

    @property
    def starved(self) -> int:
        """Calls late only by as long as the machine kept their thread off the CPU."""
        return len(starved_calls(self.history.calls))

    @property
    def cores(self) -> str:
        return "+".join(sorted(set(self.implementations))) + ", " + "+".join(sorted(set(self.fronts)))


class _FaultThread(threading.Thread):
    """The fault runs beside the workers; an error in it fails the run."""

    def __init__(self, run: Callable[[], None]) -> None:
        super().__init__(name="fault", daemon=True)
        self._body = run
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._body()
        except BaseException as exc:
            self.error = exc


def run_fault(fault: Fault, topology: Topology, resource: RedisServer, *, duration: float = DURATION,
              **overrides: Any) -> Outcome:
    duration *= SOAK
    prefix = f"f-{uuid.uuid4().hex[:10]}:"
    changes = {**overrides, **fault.overrides(WARMUP, duration, WORKERS)}
    workload = Workload(topology=topology.kind, urls=topology.urls, resource_url=resource.url, prefix=prefix,
                        run_for=WARMUP + duration + RECOVERY, seed=int(time.time()), **changes)
    raw = redis.Redis(host=resource.host, port=resource.port)
    start = CTX.Barrier(WORKERS + 1)
    try:
        with Resumer(raw, workload.paused_key, workload.pause_for), \
                Workers(worker, [(workload, start)] * WORKERS) as workers:
            try:
                start.wait(START_LIMIT)
            except threading.BrokenBarrierError:
                workers.results(1.0)  # raises with the workers that failed to start
                raise
            began = time.monotonic()
            window = Window(topology, workload, began + WARMUP, began + WARMUP + duration)
            injector = _FaultThread(lambda: fault.run(window))
            injector.start()
            reports = workers.results(workload.run_for + RESULTS_LIMIT)
            injector.join(RESULTS_LIMIT)
            if injector.error is not None:
                raise AssertionError(f"the fault {fault.label!r} failed") from injector.error
        time.sleep(KEYS_AFTER * workload.longest_ttl)
        keys_left = topology.keys_left(prefix)
        finals = {shape.name: int(raw.hget(workload.counter_key(shape.name), "value") or 0)
                  for shape in workload.shapes}
    finally:
        raw.close()
    history = merge(reports, finals, keys_left)
    struck = fault.struck + len(history.pauses)
    assert struck or type(fault) is Fault, f"the fault {fault.label!r} was never injected"
    return Outcome(fault.label, topology.label, history, check(history),
                   [report["implementation"] for report in reports], [report["front"] for report in reports],
                   (window.fault_at, window.fault_end), workload.seed)
