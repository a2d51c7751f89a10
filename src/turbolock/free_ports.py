"""Loopback ports for throwaway servers that no process of this machine's runs reuses.

A port that is merely free right now is not enough. A test that stops a master leaves its
replica, and its Sentinels, calling that port back until the test ends; a server of another test
(in another pytest worker) started on the same port meanwhile gains a replica it never had, or
Sentinels of another group (seen in CI: a group that never agreed on its replicas). So each port
handed out is claimed, by a file named after it holding the claimer's pid, until the claiming
process exits; a claim of a process that died without removing it is cleared once it is old.

Ports come from below Linux's ephemeral range (32768 on), so an outgoing connection cannot take a
port between the probe and the server's bind.
"""

from __future__ import annotations

import atexit
import os
import random
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

STALE_CLAIM_AGE = 3600.0
"""Seconds after which a claim whose process is gone is removed (a younger one is left: its
process may have just been replaced by a pid we read before it wrote its own)."""

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
    none of ``avoid`` nor any port already claimed by a running process of this machine."""
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


def _claim(port: int) -> bool:
    _claims_directory.mkdir(mode=0o700, exist_ok=True)
    path = _claims_directory / str(port)
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        _clear_if_stale(path)
        return False
    with os.fdopen(descriptor, "w") as claim:
        claim.write(str(os.getpid()))
    pid = os.getpid()
    if pid not in _claimed_by:
        _claimed_by[pid] = set()
        atexit.register(_release_claims, pid)
    _claimed_by[pid].add(port)
    _claimed_here.add(port)
    return True


def _clear_if_stale(path: Path) -> None:
    try:
        owner = int(path.read_text() or "0")
        old = time.time() - path.stat().st_mtime > STALE_CLAIM_AGE
    except (OSError, ValueError):
        return
    if old and not _running(owner):
        path.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _release_claims(pid: int) -> None:
    if os.getpid() != pid:  # a forked child exiting with its parent's handler
        return
    for port in _claimed_by.pop(pid, set()):
        (_claims_directory / str(port)).unlink(missing_ok=True)
