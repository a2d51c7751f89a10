"""Starting worker processes, collecting one result from each, and never leaving one behind."""

from __future__ import annotations

import multiprocessing
import queue
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any

# forkserver: every worker starts from a clean single-threaded server process (nothing of the
# test process leaks in, as with spawn), but forked from it with the modules already imported,
# so eight workers cost a few milliseconds to start instead of a fresh interpreter each.
CTX = multiprocessing.get_context("forkserver")
CTX.set_forkserver_preload(["redis", "turbolock", f"{__package__}._workers"])

DEFAULT_TIMEOUT = 60.0
"""Upper bound on a whole scenario; a hang fails the test instead of stalling the run."""


def _entry(target: Callable[..., Any], index: int, args: tuple[Any, ...], results: Any) -> None:
    try:
        value = target(index, *args)
    except BaseException:
        results.put((index, False, traceback.format_exc()))
    else:
        results.put((index, True, value))


class Workers:
    """``target(index, *args)`` in one process per entry of ``args_per_worker``.

    ``results()`` waits for every worker's return value (in index order) and re-raises a
    worker's exception, with its traceback, as an AssertionError in the test.
    """

    def __init__(self, target: Callable[..., Any], args_per_worker: Sequence[tuple[Any, ...]]) -> None:
        self._results: Any = CTX.Queue()
        self.processes: list[BaseProcess] = [
            CTX.Process(target=_entry, args=(target, i, tuple(args), self._results), daemon=True)
            for i, args in enumerate(args_per_worker)
        ]

    def __enter__(self) -> Workers:
        for process in self.processes:
            process.start()
        return self

    def results(self, timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
        collected: dict[int, Any] = {}
        deadline = time.monotonic() + timeout
        while len(collected) < len(self.processes):
            try:
                index, ok, value = self._results.get(timeout=0.2)
            except queue.Empty:
                crashed = [(i, p.exitcode) for i, p in enumerate(self.processes)
                           if p.exitcode not in (None, 0) and i not in collected]
                if crashed:
                    raise AssertionError(f"workers exited without a result (index, exit code): {crashed}") \
                        from None
                if time.monotonic() > deadline:
                    missing = sorted(set(range(len(self.processes))) - set(collected))
                    raise AssertionError(f"workers {missing} did not finish within {timeout:g}s") from None
                continue
            if not ok:
                raise AssertionError(f"worker {index} failed:\n{value}")
            collected[index] = value
        for process in self.processes:
            process.join(timeout=10)
        return [collected[i] for i in range(len(self.processes))]

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            process.join(timeout=10)
        self._results.close()
        self._results.join_thread()


def run_workers(target: Callable[..., Any], args_per_worker: Sequence[tuple[Any, ...]],
                timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
    with Workers(target, args_per_worker) as workers:
        return workers.results(timeout)
