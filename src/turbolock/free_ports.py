"""Loopback ports for throwaway servers that no process of this machine's runs reuses.

A port that is merely free right now is not enough. A test that stops a master leaves its
replica, and its Sentinels, calling that port back until the test ends; a server of another test
(in another pytest worker) started on the same port meanwhile gains a replica it never had, or
Sentinels of another group (seen in CI: a group that never agreed on its replicas). So each port
handed out is claimed, by a file named after it holding the claimer's pid, for as long as that
process runs. Claims are made, and those of processes that are gone (a killed run, a
multiprocessing child that ended with ``os._exit``) cleared, under one lock of the directory's,
so two processes can never both hold a port.

Ports come from below Linux's ephemeral range (32768 on), so an outgoing connection cannot take a
port between the probe and the server's bind.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import random
import socket
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

_claims_directory = Path(tempfile.gettempdir()) / f"turbolock-ports-{os.getuid()}"
_claimed_here: set[int] = set()
"""Every port claimed by this process, or by its parent before a fork: never handed out again."""
_claimed_by: dict[int, set[int]] = {}
"""Claims by pid: a process's exit removes its own only (a forked child inherits the parent's)."""


class NoFreePortError(RuntimeError):
    """No unclaimed free port was found in the range asked for."""


def claim_free_port(lowest: int, highest: int, *, also_free: Sequence[int] = (),
                    avoid: Sequence[int] = ()) -> int:
    """A port in ``[lowest, highest]``, free on 127.0.0.1 and claimed for this process, whose
    ``port + offset`` for each offset in ``also_free`` is free too (a cluster node's bus port);
    none of ``avoid`` nor any port claimed by a running process of this machine."""
    for _ in range(2000):
        port = random.randint(lowest, highest)
        wanted = [port, *(port + offset for offset in also_free)]
        if port == 6379 or any(taken in avoid or taken in _claimed_here for taken in wanted):
            continue
        if all(_bindable(each) for each in wanted) and _claim(port):
            return port
    raise NoFreePortError(f"no unclaimed free port in {lowest}-{highest}")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def _directory_locked() -> Iterator[Path]:
    _claims_directory.mkdir(mode=0o700, exist_ok=True)
    with open(_claims_directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel even if this process dies here
        try:
            yield _claims_directory
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _claim(port: int) -> bool:
    pid = os.getpid()
    with _directory_locked() as directory:
        path = directory / str(port)
        owner = _owner(path)
        if owner is not None and owner != pid and _running(owner):
            return False
        path.write_text(str(pid))
    if pid not in _claimed_by:
        _claimed_by[pid] = set()
        atexit.register(_release_claims, pid)
    _claimed_by[pid].add(port)
    _claimed_here.add(port)
    return True


def _owner(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):  # none, or not a pid: nobody's
        return None


def _running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _release_claims(pid: int) -> None:
    if os.getpid() != pid:  # a forked child exiting with its parent's handler
        return
    with _directory_locked() as directory:
        for port in _claimed_by.pop(pid, set()):
            path = directory / str(port)
            if _owner(path) == pid:
                path.unlink(missing_ok=True)
