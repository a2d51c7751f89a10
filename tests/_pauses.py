"""Holders paused past their ttl: a worker process stops itself (SIGSTOP) at the point under test
and the test process resumes it a fixed time later, each on its own timer, so pauses overlap as
they would in real processes. The two meet through a Redis list of the paused pids."""

from __future__ import annotations

import os
import signal
import threading
from types import TracebackType

import redis


def stop_self(raw: redis.Redis, key: str) -> None:
    """Tell the ``Resumer`` listening on ``key`` that this process stops, and stop it."""
    raw.rpush(key, os.getpid())
    os.kill(os.getpid(), signal.SIGSTOP)


def _resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


class Resumer:
    """While the ``with`` block runs: SIGCONT each pid pushed to ``key`` ``pause`` seconds after
    it stopped itself. At the end, every pending timer still fires before the block exits."""

    def __init__(self, raw: redis.Redis, key: str, pause: float) -> None:
        self.raw = raw
        self.key = key
        self.pause = pause
        self.resumed = 0
        self._stop = threading.Event()
        self._timers: list[threading.Timer] = []
        self._thread = threading.Thread(target=self._run, name="resumer", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            popped = self.raw.blpop([self.key], timeout=0.1)
            if popped is not None:
                timer = threading.Timer(self.pause, _resume, (int(popped[1]),))
                timer.start()
                self._timers.append(timer)
                self.resumed += 1

    def __enter__(self) -> Resumer:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5)
        for timer in self._timers:
            timer.join(self.pause + 1)
