"""Running a test's step in a forked child, which reports back through a pipe and never returns
into pytest there."""

from __future__ import annotations

import os
import select
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any


def in_forked_child(work: Callable[[], str], meanwhile: Callable[[], None] | None = None,
                    limit: float = 30.0) -> str:
    """What ``work()`` returned in a forked child (the traceback of what it raised instead);
    ``meanwhile()`` runs in the parent while the child works."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        message = ""
        try:
            os.close(read_fd)
            message = work()
        except BaseException:
            message = traceback.format_exc()
        finally:
            try:
                os.write(write_fd, message.encode())
            finally:
                os._exit(0)
    os.close(write_fd)
    try:
        if meanwhile is not None:
            meanwhile()
    finally:
        reported = _wait_for_child(pid, read_fd, limit)
    return reported


def in_child_forked_while_held(lock: AbstractContextManager[Any], work: Callable[[], str],
                                limit: float = 10.0) -> str:
    """``in_forked_child(work)`` forked while another thread of this process holds ``lock`` (let
    go once the child runs): what a module-wide lock held elsewhere at a fork leaves the child."""
    inside, leave = threading.Event(), threading.Event()

    def holding() -> None:
        with lock:
            inside.set()
            leave.wait(limit)

    thread = threading.Thread(target=holding)
    thread.start()
    try:
        assert inside.wait(5)
        return in_forked_child(work, leave.set, limit=limit)
    finally:
        leave.set()
        thread.join()


def _wait_for_child(pid: int, read_fd: int, limit: float) -> str:
    deadline = time.monotonic() + limit
    chunks = []
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.kill(pid, 9)
                raise AssertionError("the forked child did not finish")
            readable, _, _ = select.select([read_fd], [], [], remaining)
            if readable:
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    return b"".join(chunks).decode()
