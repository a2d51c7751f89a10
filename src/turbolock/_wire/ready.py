"""Which sockets have something to read (or have finished connecting) now or within a timeout,
by ``poll(2)``: no limit on
the descriptor's number. ``select(2)`` refuses descriptors from FD_SETSIZE (1024) on, which any
busy server process has: a pooled connection was then taken for stale on every checkout and the
subscriber thread reconnected in a loop. Asks the kernel only; reads and writes nothing."""

from __future__ import annotations

import math
import select
from collections.abc import Sequence
from typing import Any

_EVENTS = select.POLLIN | select.POLLPRI if hasattr(select, "poll") else 0


def readable(sockets: Sequence[Any], timeout: float, connecting: Sequence[Any] = ()) -> list[Any]:
    """Those of ``sockets`` (sockets, or descriptors as ints) with something to read, or closed
    or in error (a read then says which), and those of ``connecting`` (sockets whose
    non-blocking connect was started) whose connect has finished or failed (``SO_ERROR`` says
    which), waiting up to ``timeout`` seconds for the first."""
    if not hasattr(select, "poll"):  # no poll (Windows): select has no descriptor limit there
        ready, done, _ = select.select(sockets, connecting, (), timeout)
        return [*ready, *done]
    poller = select.poll()
    by_fd: dict[int, Any] = {}
    for sock in sockets:
        fd = sock if isinstance(sock, int) else sock.fileno()
        poller.register(fd, _EVENTS)
        by_fd[fd] = sock
    for sock in connecting:
        fd = sock.fileno()
        poller.register(fd, select.POLLOUT)
        by_fd[fd] = sock
    return [by_fd[fd] for fd, _ in poller.poll(math.ceil(timeout * 1000.0))]
