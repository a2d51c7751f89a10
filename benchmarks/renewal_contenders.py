"""The renewal contenders: three ways redis-py users keep held locks alive, and turbolock's renewer.

Every redis-py contender renews locks that are already held (keys and tokens from ``hold``), once
each, and checks every answer. turbolock is measured on its real renewal path: a client's own
renewer thread, woken by its own timer wheel, renewing a set of auto-renewed leases that all come
due in one tick. ``RoundProbe`` only watches that thread: it notes the clock (wall and the
thread's CPU) before the wheel's ``advance`` and after ``_send``, the renewal code itself is
untouched.
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import threading
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from turbolock import AutoRenew, LockClient
from turbolock._flows.renewal_book import RENEW_CHUNK
from turbolock._sync.renewer import Renewer
from turbolock._wire import core as _core
from turbolock._wire import scripts as _scripts
from turbolock.bench.contenders import BenchmarkError, Timing, per_key, timed
from turbolock.bench.renewal import HeldLocks, check_all_renewed
from turbolock.bench.workload import CHUNK_SIZE, KEY_PREFIX, TTL_MS, TTL_SECONDS
from turbolock.lease import Lease
from turbolock.options import DEFAULT_TIMEOUT

ROUND_LEAD = 1.5
"""Seconds from an acquire's send to its locks' renewal in the throughput round: long enough for
``acquire_many`` of 100k locks to return first, so the round starts from the wheel, not from a
backlog; short enough not to wait long."""
ROUND_WAIT = 120.0
"""Longest wait for a round before the benchmark gives up."""


def core_renews(core: str) -> bool:
    """Whether ``LockClient(core=core)`` can auto-renew (the compiled core needs its TimerWheel)."""
    if core == "py":
        return True
    return _core.core_c is not None and hasattr(_core.core_c, "TimerWheel")


# -- redis-py -------------------------------------------------------------------------------------


class RedisPyExtend:
    """``redis.lock.Lock.extend(ttl, replace_ttl=True)``, one lock after the other.

    Only the first ``count`` held locks (one by one is slow); their ``Lock`` objects exist
    before the clock starts, as they would in a program that holds them.
    """

    def __init__(self, url: str, count: int) -> None:
        self.redis = redis.Redis.from_url(url)
        self.count = count

    def renew(self, held: HeldLocks) -> Timing:
        locks = []
        for key, token in zip(held.keys[:self.count], held.tokens[:self.count], strict=True):
            lock = self.redis.lock(key, timeout=TTL_SECONDS, thread_local=False)
            lock.local.token = token
            locks.append(lock)

        def run() -> list[bool]:
            return [lock.extend(TTL_SECONDS, replace_ttl=True) for lock in locks]

        replies, wall, cpu = timed(run)
        check_all_renewed("redis-py Lock.extend", [int(r) for r in replies], len(locks))
        return Timing(len(locks), wall, cpu)

    def close(self) -> None:
        self.redis.close()


class RedisPyPipelinedExtend:
    """``pipeline(transaction=False)``: one EVALSHA of turbolock's EXTEND script per lock, in
    chunks of ``CHUNK_SIZE`` per ``execute()``."""

    def __init__(self, url: str) -> None:
        self.redis = redis.Redis.from_url(url)
        self.sha = self.redis.script_load(_scripts.EXTEND.source)

    def renew(self, held: HeldLocks) -> Timing:
        sha = self.sha
        keys, tokens = held.keys, held.tokens

        def run() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            replies: list[Any] = []
            for start in range(0, len(keys), CHUNK_SIZE):
                stop = start + CHUNK_SIZE
                for key, token in zip(keys[start:stop], tokens[start:stop], strict=True):
                    pipe.evalsha(sha, 1, key, token, TTL_MS)
                replies.extend(pipe.execute())
            return replies

        replies, wall, cpu = timed(run)
        check_all_renewed("redis-py pipelined EVALSHA", replies, len(keys))
        return Timing(len(keys), wall, cpu)

    def close(self) -> None:
        self.redis.close()


class RedisPyRenewMany:
    """turbolock's RENEW_MANY script registered with redis-py (``register_script``): one EVALSHA
    per ``RENEW_CHUNK`` keys, each call waiting for its reply."""

    def __init__(self, url: str) -> None:
        self.redis = redis.Redis.from_url(url)
        self.script = self.redis.register_script(_scripts.RENEW_MANY.source)

    def renew(self, held: HeldLocks) -> Timing:
        script = self.script
        keys, tokens = held.keys, held.tokens

        def run() -> list[Any]:
            replies: list[Any] = []
            for start in range(0, len(keys), RENEW_CHUNK):
                stop = start + RENEW_CHUNK
                replies.append(script(keys=keys[start:stop], args=[TTL_MS, *tokens[start:stop]]))
            return per_key(replies, len(keys), RENEW_CHUNK)

        replies, wall, cpu = timed(run)
        check_all_renewed("redis-py EVALSHA per 1000 keys", replies, len(keys))
        return Timing(len(keys), wall, cpu)

    def close(self) -> None:
        self.redis.close()


# -- turbolock ------------------------------------------------------------------------------------


@dataclass
class Round:
    """One renewal round as the renewer thread lived it (monotonic seconds, thread CPU seconds)."""

    start: float
    end: float
    cpu: float
    locks: int

    @property
    def wall(self) -> float:
        return self.end - self.start


class _ProbedWheel:
    """Stands in for the renewer's wheel: ``schedule`` and ``cancel`` are the wheel's own bound
    methods (no extra call), ``advance`` notes the clocks first: about 1.5 us more per tick, at
    100 ticks/s 0.015% of a core, inside the steady-state figure."""

    def __init__(self, wheel: Any, probe: RoundProbe) -> None:
        self.wheel = wheel
        self.schedule = wheel.schedule
        self.cancel = wheel.cancel
        self._wheel_advance = wheel.advance
        self._probe = probe

    def advance(self, now: float) -> list[int]:
        probe = self._probe
        probe._tick_start = time.monotonic()
        probe._tick_cpu = time.thread_time()
        due: list[int] = self._wheel_advance(now)
        if due:
            probe._round_locks = len(due)
        return due

    def __len__(self) -> int:
        return len(self.wheel)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wheel, name)


class RoundProbe:
    """Records every renewal round of one ``Renewer``, from the ``advance`` that found locks due
    to the end of ``_send`` (the round's scripts sent and their replies settled). ``stop_after``
    rounds, the renewer is made to forget every lease (on its own thread, after the clock
    stopped), so no second round can start. ``profile`` runs each round's ``_send`` under cProfile."""

    def __init__(self, renewer: Renewer, *, profile: bool = False) -> None:
        for attribute in ("book", "_send", "_thread", "held_leases", "remove"):
            if not hasattr(renewer, attribute):
                raise BenchmarkError(f"turbolock's Renewer has no {attribute!r} any more; update RoundProbe")
        self.renewer = renewer
        self.rounds: list[Round] = []
        self.done = threading.Event()
        self.stop_after: int | None = None
        self.profiler = cProfile.Profile() if profile else None
        self._tick_start = 0.0
        self._tick_cpu = 0.0
        self._round_locks = 0
        self._renew = renewer._send
        book = renewer.book
        book._wheel = _ProbedWheel(book._wheel, self)
        renewer._send = self._probed_renew  # type: ignore[method-assign]

    def arm(self, stop_after: int | None) -> None:
        self.rounds = []
        self.done.clear()
        self.stop_after = stop_after

    def _probed_renew(self, due: list[Lease]) -> None:
        start, cpu = self._tick_start, self._tick_cpu
        if self.profiler is not None:
            self.profiler.runcall(self._renew, due)
        else:
            self._renew(due)
        self.rounds.append(Round(start, time.monotonic(), time.thread_time() - cpu, self._round_locks))
        if self.stop_after is not None and len(self.rounds) >= self.stop_after:
            self.renewer.remove(self.renewer.held_leases())
            self.done.set()

    @property
    def thread(self) -> threading.Thread:
        thread = self.renewer._thread
        if thread is None:
            raise BenchmarkError("turbolock's renewer thread has not started")
        return thread


def _client(url: str, core: str, timeout: float = DEFAULT_TIMEOUT) -> LockClient:
    return LockClient.from_url(url, core=core, key_prefix=KEY_PREFIX, chunk_size=CHUNK_SIZE, timeout=timeout)


class TurbolockRenewer:
    """One ``LockClient`` (kept across repeats: its connection and script stay warm), and its
    renewer measured over one round of every lock it holds."""

    def __init__(self, url: str, core: str, *, profile: bool = False, client: Any = None) -> None:
        self.client = _client(url, core) if client is None else client
        self.probe = RoundProbe(self.client._renewer(), profile=profile)

    def renew_round(self, names: Sequence[str], lead: float = ROUND_LEAD) -> tuple[Timing, Round]:
        """Acquire every name with auto_renew so that all come due ``lead`` seconds after the
        acquire was sent, let the renewer renew them once, and return that round's timing
        (``cpu`` is the renewer thread's). The leases are then forgotten, not released."""
        probe = self.probe
        probe.arm(stop_after=1)
        policy = AutoRenew(renew_before=TTL_SECONDS - lead)
        leases = self.client.acquire_many(names, TTL_SECONDS, auto_renew=policy).acquired
        if len(leases) != len(names):
            raise BenchmarkError(f"turbolock: {len(names) - len(leases)} of {len(names)} locks not taken")
        if not probe.done.wait(ROUND_WAIT):
            raise BenchmarkError(f"turbolock: no renewal round within {ROUND_WAIT:g} s")
        (round_,) = probe.rounds
        if round_.locks != len(leases):
            raise BenchmarkError(f"turbolock: one round renewed {round_.locks} of {len(leases)} locks")
        renewed = sum(1 for lease in leases
                      if lease.renewal is not None and lease.renewal.renewals == 1 and not lease.is_lost)
        if renewed != len(leases):
            raise BenchmarkError(f"turbolock: {len(leases) - renewed} of {len(leases)} renewals failed")
        return Timing(len(leases), round_.wall, round_.cpu), round_

    def profile_report(self, top: int) -> str:
        if self.probe.profiler is None:
            return ""
        out = io.StringIO()
        pstats.Stats(self.probe.profiler, stream=out).sort_stats("tottime").print_stats(top)
        return out.getvalue()

    def close(self) -> None:
        self.client.close()


class TurbolockExtendMany:
    """``LockClient.extend_many`` over every lock the same client took just before (untimed):
    what a caller renewing its own locks writes, beside the renewer's rounds."""

    def __init__(self, url: str, core: str) -> None:
        self.client = _client(url, core)

    def take(self, names: Sequence[str]) -> list[Lease]:
        leases = self.client.acquire_many(names, TTL_SECONDS).acquired
        if len(leases) != len(names):
            raise BenchmarkError(f"turbolock: {len(names) - len(leases)} of {len(names)} locks not taken")
        return leases

    def extend(self, leases: list[Lease]) -> Timing:
        extended, wall, cpu = timed(self.client.extend_many, leases, TTL_SECONDS)
        if not all(extended):
            raise BenchmarkError(f"turbolock extend_many: {extended.count(False)} of {len(leases)} refused")
        return Timing(len(leases), wall, cpu)

    def close(self) -> None:
        self.client.close()


class SteadyRenewer:
    """A client holding ``names`` auto-renewed for as long as the steady-state window lasts."""

    def __init__(self, url: str, core: str, ttl: float, renew_before: float) -> None:
        # The client deadline must leave renew_before a margin (check_policy refuses otherwise).
        self.client = _client(url, core, min(DEFAULT_TIMEOUT, renew_before / 2))
        self.probe = RoundProbe(self.client._renewer())
        self.probe.arm(stop_after=None)
        self.policy = AutoRenew(renew_before=renew_before)
        self.ttl = ttl
        self.leases: list[Lease] = []
        self._clock: int | None = None

    def start(self, names: Sequence[str]) -> float:
        """Acquire and hold; the monotonic time the acquire was sent (the first round's origin)."""
        self.leases = self.client.acquire_many(names, self.ttl, auto_renew=self.policy).acquired
        if len(self.leases) != len(names):
            raise BenchmarkError(f"steady state: {len(names) - len(self.leases)} locks not taken")
        ident = self.probe.thread.ident
        assert ident is not None
        self._clock = time.pthread_getcpuclockid(ident)
        return self.leases[0].acquired_at

    def cpu(self) -> float:
        """CPU seconds the renewer thread has used so far (its own clock, nothing else's)."""
        if self._clock is None:
            raise BenchmarkError("steady state: not started")
        return time.clock_gettime(self._clock)

    def forget(self) -> None:
        """Stop renewing without releasing (the benchmark flushes the server instead: faster)."""
        renewer = self.probe.renewer
        renewer.remove(renewer.held_leases())

    def outcome(self) -> tuple[int, int]:
        """(fewest renewals of any lease, leases lost)."""
        fewest = min(lease.renewal.renewals if lease.renewal is not None else 0 for lease in self.leases)
        return fewest, sum(1 for lease in self.leases if lease.is_lost)

    def close(self) -> None:
        self.client.close()


# -- memory ---------------------------------------------------------------------------------------


def retained_per_lease(url: str, core: str, names: Sequence[str], auto_renew: bool) -> float:
    """Bytes per lease that ``acquire_many(names, auto_renew=...)`` leaves allocated (tracemalloc):
    the result and its leases, plus, with auto_renew, everything the renewer keeps per lock."""
    policy: AutoRenew | bool = AutoRenew() if auto_renew else False
    with _client(url, core) as client:
        warm = client.acquire_many([f"warm:{i}" for i in range(10)], TTL_SECONDS, auto_renew=policy)
        client.release_many(warm.acquired)  # connection open, buffers grown, renewer started
        gc.collect()
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            result = client.acquire_many(names, TTL_SECONDS, auto_renew=policy)
            gc.collect()
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        held = len(result.acquired)
        client.release_many(result.acquired)
    if held != len(names):
        raise BenchmarkError(f"memory: only {held} of {len(names)} locks were taken")
    return (after - before) / held

