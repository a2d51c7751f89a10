"""A call run on a thread of its own, keeping what it returned or the exception it raised."""

from __future__ import annotations

import threading
from collections.abc import Callable


class InThread:
    """``call()`` started on a new thread; ``outcome`` is its result or its exception once
    ``join`` saw it end (``NOT_DONE`` before)."""

    NOT_DONE = object()

    def __init__(self, call: Callable[[], object]) -> None:
        self.outcome: object = self.NOT_DONE
        self._call = call
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.outcome = self._call()
        except Exception as exc:  # the outcome under test
            self.outcome = exc

    def join(self, timeout: float) -> object:
        self.thread.join(timeout)
        return self.outcome

    def is_alive(self) -> bool:
        return self.thread.is_alive()
