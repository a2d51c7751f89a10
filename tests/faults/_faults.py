"""The faults: each runs from ``window.fault_at`` to ``window.fault_end`` (monotonic) in the test
process, and leaves everything healed when it returns, even when it raises. A fault may also
change the workload (``overrides``): a holder that pauses itself is part of what the workers do.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace
from typing import Any, NamedTuple

import redis

from cluster._helpers import fail_over, replica_of
from turbolock._wire.slots import key_slot
from turbolock.redis_server import RedisServer

from ._topology import Cluster, Topology
from ._workload import AFTER_CHECK, LONG, SHORT, SOAK, Workload

FRESH = 0.01
"""A lock whose PTTL is within this of its ttl was taken a moment ago: its holder is inside."""
TICK = 0.001


class Window(NamedTuple):
    topology: Topology
    workload: Workload
    fault_at: float
    fault_end: float


def sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


class Fault:
    """No fault at all: the baseline every other row is read against."""

    label = "none (baseline)"
    struck = 0
    """How many times the fault was injected: a run where it never was proves nothing."""

    def overrides(self, fault_at: float, duration: float, workers: int) -> dict[str, Any]:
        """Changes to the workload; ``fault_at`` is an offset from the workers' start."""
        return {}

    def run(self, window: Window) -> None:
        sleep_until(window.fault_end)


class HolderPause(Fault):
    """Holders stop themselves (SIGSTOP) for 2.5 ttls in a short section, one after another
    through the window, before or after their last check; the harness resumes them."""

    def __init__(self, point: str, *, fenced: bool = False, holders: int = 4) -> None:
        self.point = point
        self.fenced = fenced
        self.holders = holders
        where = "after" if point == AFTER_CHECK else "before"
        self.label = f"holder SIGSTOP 2.5x ttl, {where} its check" + (", fenced resource" if fenced else "")

    def overrides(self, fault_at: float, duration: float, workers: int) -> dict[str, Any]:
        rounds = round(SOAK)
        count = min(self.holders, workers)
        step = duration / (count * rounds)
        pauses = {i: tuple(fault_at + (r * count + i) * step for r in range(rounds)) for i in range(count)}
        return {"pause": self.point, "pauses": pauses, "fenced": self.fenced}


def _fresh(raw: redis.Redis, key: str, ttl: float, until: float) -> bool:
    """Wait until ``key`` was just taken (its PTTL near ``ttl``); False if ``until`` came first."""
    while time.monotonic() < until:
        if raw.pttl(key) >= (ttl - FRESH) * 1000:
            return True
        time.sleep(TICK)
    return False


class Restart(Fault):
    """``kill -9`` of the servers ``which`` right after a holder took the short lock (so it is
    inside its section), then start them again on the same port: at once, or after
    ``down_for``. Repeated through the window. The short sections last 120-200 ms here, longer
    than a restart and a successor's acquire and read: a restart that forgets the lock lets the
    successor in while the holder still works, every time."""

    WORK = (0.12, 0.2)

    def __init__(self, which: tuple[int, ...] = (0,), *, down_for: float = 0.0, gap: float = 0.25) -> None:
        self.which = which
        self.down_for = down_for
        self.gap = gap
        servers = "server" if which == (0,) else f"masters {', '.join(str(i) for i in which)}"
        when = "at once" if down_for == 0 else f"after {down_for:g} s"
        self.label = f"{servers} kill -9, restarted {when}"
        self.restarts: list[tuple[float, float]] = []
        """When each kill happened and when the servers were up again (monotonic)."""

    def overrides(self, fault_at: float, duration: float, workers: int) -> dict[str, Any]:
        return {"shapes": (replace(SHORT, work=self.WORK), LONG)}

    def run(self, window: Window) -> None:
        topology, workload = window.topology, window.workload
        short = workload.shapes[0]
        servers = [topology.servers[i] for i in self.which]
        sleep_until(window.fault_at)
        try:
            while time.monotonic() < window.fault_end:
                with contextlib.closing(topology.raw(self.which[0])) as watch:
                    if not _fresh(watch, workload.prefix + short.name, short.ttl, window.fault_end):
                        return
                killed = time.monotonic()
                for server in servers:
                    server.kill()
                time.sleep(self.down_for)
                _start_all(servers)
                self.restarts.append((killed, time.monotonic()))
                self.struck += 1
                time.sleep(self.gap)
        finally:
            _start_all([server for server in servers if not server.running])


def _start_all(servers: list[RedisServer]) -> None:
    """Start the servers side by side (each start waits until it listens)."""
    starting = [threading.Thread(target=server.start) for server in servers]
    for thread in starting:
        thread.start()
    for thread in starting:
        thread.join()
    down = [server.port for server in servers if not server.running]
    assert not down, f"servers on ports {down} did not start again"


class ServerPause(Fault):
    """The lock server (or one master) SIGSTOPped for 2.5 ttls at a time, as often as that fits
    in the window (at least once)."""

    def __init__(self, index: int = 0, *, gap: float = 0.2) -> None:
        self.index = index
        self.gap = gap
        self.label = "server SIGSTOP 2.5x ttl" if index == 0 else f"master {index} SIGSTOP 2.5x ttl"

    def run(self, window: Window) -> None:
        server = window.topology.servers[self.index]
        stopped_for = 2.5 * window.workload.longest_ttl
        sleep_until(window.fault_at)
        try:
            while True:
                server.pause()
                self.struck += 1
                time.sleep(stopped_for)
                server.resume()
                time.sleep(self.gap)
                if time.monotonic() + stopped_for > window.fault_end:
                    return
        finally:
            server.resume()


class Network(Fault):
    """The proxy in front of the lock server drops or delays bytes for the whole window."""

    MODES = {
        "blackhole": "proxy black-holes both directions",
        "requests": "proxy drops requests (client to server)",
        "replies": "proxy drops replies (server to client)",
        "delay": "proxy delays 20-50 ms each way, ttl 200 ms",
    }

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.label = self.MODES[mode]

    def overrides(self, fault_at: float, duration: float, workers: int) -> dict[str, Any]:
        if self.mode != "delay":
            return {}
        return {"shapes": (replace(SHORT, ttl=0.2), replace(LONG, ttl=0.2))}

    def run(self, window: Window) -> None:
        proxy = window.topology.proxy
        assert proxy is not None, "a network fault needs the proxied topology"
        sleep_until(window.fault_at)
        try:
            if self.mode == "blackhole":
                proxy.blackhole()
            elif self.mode == "requests":
                proxy.drop(to_server=True, to_client=False)
            elif self.mode == "replies":
                proxy.drop(to_server=False, to_client=True)
            else:
                proxy.delay(0.02, 0.05)
            self.struck += 1
            sleep_until(window.fault_end)
        finally:
            proxy.heal()


class Storm(Fault):
    """A command sent to the lock server every ``every`` seconds through the window."""

    COMMANDS = {
        "client-kill": ("CLIENT KILL storm, every 200 ms",
                        (("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"),
                         ("CLIENT", "KILL", "TYPE", "pubsub", "SKIPME", "yes"))),
        "script-flush": ("SCRIPT FLUSH storm, every 200 ms", (("SCRIPT", "FLUSH"),)),
    }

    def __init__(self, kind: str, every: float = 0.2) -> None:
        self.label, self.commands = self.COMMANDS[kind]
        self.every = every

    def run(self, window: Window) -> None:
        raw = window.topology.raw()
        sleep_until(window.fault_at)
        try:
            while time.monotonic() < window.fault_end:
                for command in self.commands:
                    raw.execute_command(*command)
                self.struck += 1
                time.sleep(self.every)
        finally:
            raw.close()


class Limit(Fault):
    """A server limit hit for the whole window: memory (``maxmemory`` below what is used, with
    ``noeviction``: every write is refused with OOM) or clients (``maxclients 1`` with every
    connection but the test's killed: nobody can connect)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.label = ("OOM: maxmemory exceeded, noeviction" if kind == "memory"
                      else "maxclients exhausted, every client disconnected")

    def run(self, window: Window) -> None:
        raw = window.topology.raw()
        sleep_until(window.fault_at)
        try:
            if self.kind == "memory":
                raw.config_set("maxmemory-policy", "noeviction")
                raw.config_set("maxmemory", 1)
            else:
                raw.config_set("maxclients", 1)
                for command in Storm.COMMANDS["client-kill"][1]:
                    raw.execute_command(*command)
            self.struck += 1
            sleep_until(window.fault_end)
        finally:
            if self.kind == "memory":
                raw.config_set("maxmemory", 0)
            else:
                raw.config_set("maxclients", 10000)
            raw.close()


class ClusterFailover(Fault):
    """A planned ``CLUSTER FAILOVER`` of the master that serves the short lock: its replica
    takes over once it has every write. Once, then again while the window lasts (a soak)."""

    label = "planned CLUSTER FAILOVER of the lock's master"

    def run(self, window: Window) -> None:
        topology = window.topology
        assert isinstance(topology, Cluster)
        cluster = topology.cluster
        slot = key_slot((window.workload.prefix + window.workload.shapes[0].name).encode())
        sleep_until(window.fault_at)
        while True:
            fail_over(cluster, replica_of(cluster, cluster.master_of(slot)))
            self.struck += 1
            if time.monotonic() >= window.fault_end:
                return
            cluster.wait_ok()
