"""Many threads, one lock: each takes it (blocking), runs a short critical section, gives it back.

Counts hand-offs and owner changes (the next holder is another thread). A thread that finds
another inside the critical section fails the run: a fast wrong answer must not win.
"""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple

from turbolock import LockClient

from .contenders import BenchmarkError, redis_py
from .workload import KEY_PREFIX

TTL = 10.0
CRITICAL_SECONDS = 0.0005
"""The flash sale's critical section: read the stock, 0.5 ms of work, write it back."""


class Contention(NamedTuple):
    handoffs: int
    seconds: float
    owner_changes: int

    @property
    def rate(self) -> float:
        return self.handoffs / self.seconds


def contend(locks: list[Any], seconds: float) -> Contention:
    """Runs one thread per lock object (all on the same name) for ``seconds``."""
    inside = threading.Lock()
    last_owner: list[int] = [-1]
    counts = [0] * len(locks)
    changes = [0]
    failures: list[BaseException] = []
    start = threading.Barrier(len(locks) + 1)
    stop_at = [0.0]

    def loop(worker: int, lock: Any) -> None:
        try:
            start.wait()
            while time.monotonic() < stop_at[0]:
                if not lock.acquire():
                    raise BenchmarkError(f"a worker waited {TTL:g} s for the lock")
                if not inside.acquire(blocking=False):
                    raise BenchmarkError("two workers held the lock at once")
                if last_owner[0] != worker:
                    changes[0] += 1
                    last_owner[0] = worker
                counts[worker] += 1
                time.sleep(CRITICAL_SECONDS)
                inside.release()
                lock.release()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=loop, args=(i, lock), daemon=True) for i, lock in enumerate(locks)]
    for thread in threads:
        thread.start()
    began = time.monotonic()
    stop_at[0] = began + seconds
    start.wait()
    for thread in threads:
        thread.join(seconds + TTL + 5)
    elapsed = time.monotonic() - began
    if failures:
        raise failures[0]
    handoffs = sum(counts)
    return Contention(handoffs, elapsed, max(changes[0] - 1, 0))


class TurbolockContention:
    """``client.lock(name).acquire()`` blocking, woken by the release."""

    def __init__(self, url: str, core: str, threads: int, name: str) -> None:
        self.client = LockClient.from_url(url, core=core, key_prefix=KEY_PREFIX, timeout=TTL)
        self.threads = threads
        self.name = name

    def run(self, seconds: float) -> Contention:
        return contend([self.client.lock(self.name, TTL, timeout=TTL) for _ in range(self.threads)], seconds)

    def close(self) -> None:
        self.client.close()


class RedisPyContention:
    """redis-py's ``Lock(sleep=0.001).acquire()``: its own polling, every millisecond."""

    def __init__(self, url: str, threads: int, name: str, hiredis: bool | None = None) -> None:
        self.redis = redis_py(url, hiredis, max_connections=threads + 1)
        self.threads = threads
        self.name = name

    def run(self, seconds: float) -> Contention:
        locks = [self.redis.lock(KEY_PREFIX + self.name, timeout=TTL, sleep=0.001, blocking_timeout=TTL)
                 for _ in range(self.threads)]
        return contend(locks, seconds)

    def close(self) -> None:
        self.redis.close()

