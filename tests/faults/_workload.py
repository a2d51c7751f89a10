"""What the workers of one fault run do, as one picklable value, and which core and front end
each worker uses.

Two locks: "short" sections (a few tens of milliseconds of work, not renewed) and "long" ones
(longer than the ttl, auto-renewed, so renewal and its loss signal are under test too). Each
section: acquire with a wait, read the lock's counter on the resource server, work, check that
the lease is still safely held, write the counter plus one, release.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from turbolock._wire import core as _core

BEFORE_CHECK = "before-check"
AFTER_CHECK = "after-check"

SOAK = max(1.0, float(os.environ.get("TURBOLOCK_FAULT_SOAK", "1") or 1))
"""Longer runs (``scripts/soak``): every fault lasts this many times longer, and the faults
that repeat (restarts, storms, pauses) repeat that many times more."""


@dataclass(frozen=True)
class Shape:
    """One lock's sections: its ttl, how long the work between the read and the write takes
    (uniform, seconds), and whether the lease is auto-renewed meanwhile."""

    name: str
    ttl: float
    work: tuple[float, float]
    renewed: bool


SHORT = Shape("short", 0.3, (0.02, 0.08), renewed=False)
LONG = Shape("long", 0.3, (0.35, 0.55), renewed=True)


@dataclass(frozen=True)
class Workload:
    """Everything a worker needs: where the locks and the resource are, how long to run, and
    how its sections go."""

    topology: str
    """"single" (one server, ``urls[0]``), "redlock" (the masters) or "cluster" (from ``urls[0]``)."""
    urls: tuple[str, ...]
    resource_url: str
    prefix: str
    run_for: float
    """Seconds the workers keep starting sections, from when they all start together."""
    shapes: tuple[Shape, ...] = (SHORT, LONG)
    long_share: float = 0.25
    """The share of sections on the long, renewed lock."""
    wait: float = 0.4
    """A blocking acquire's wait (``timeout=``): its deadline."""
    timeout: float = 0.25
    """The clients' call timeout (and connect timeout): a single-server call's deadline."""
    node_timeout: float = 0.05
    """A Redlock master's reply timeout: a Redlock call's deadline per attempt."""
    retry_delay: float = 0.02
    """A blocking Redlock acquire's longest pause between attempts."""
    margin: float = 0.05
    """The least validity a holder must have left to write (else it drops the section)."""
    fenced: bool = False
    """Acquire with ``fenced=True`` and read and write through a ``FencedStore`` (one server)."""
    pause: str | None = None
    """BEFORE_CHECK or AFTER_CHECK: where the pausing workers stop themselves."""
    pauses: dict[int, tuple[float, ...]] = field(default_factory=dict)
    """Worker index -> when it pauses (seconds from the start): once per time, in its next short
    section from then on."""
    pause_for: float = 0.75
    """How long a paused holder stays stopped (2.5 ttls)."""
    seed: int = 0

    def counter_key(self, lock: str) -> str:
        return f"{self.prefix}data:{lock}"

    @property
    def paused_key(self) -> str:
        return f"{self.prefix}data:paused"

    @property
    def release_budget(self) -> float:
        """A release's deadline: a node timeout on Redlock, else the call timeout."""
        return self.node_timeout if self.topology == "redlock" else self.timeout

    @property
    def longest_ttl(self) -> float:
        return max(shape.ttl for shape in self.shapes)


def cores() -> tuple[str, ...]:
    """The cores to mix: both when the compiled one is built."""
    return ("c", "py") if _core.core_c is not None else ("py",)


def flavour(index: int) -> tuple[str, str]:
    """Worker ``index``'s core and front end: every pairing of the cores with "sync" and
    "async" among any four consecutive workers."""
    mixed = cores()
    return mixed[index % len(mixed)], ("sync", "async")[(index // 2) % 2]
