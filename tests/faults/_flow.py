"""A worker's loop, written once for the threaded and the asyncio clients: a generator that
yields each step that touches the outside and gets its result back (or its exception thrown
in). ``_worker`` drives it: a ``LOCK`` step is a call of the lock client (awaited on asyncio),
a ``BLOCKING`` one a call of redis-py (in a thread on asyncio), ``SLEEP`` a pause in seconds,
``INLINE`` a call made as it is (stopping the process).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from typing import Any

from _pauses import stop_self
from turbolock import LockError, LockNotOwnedError

from ._history import ACKED, REFUSED, SKIPPED
from ._recorder import Recorder, outcome, run_queue_wait
from ._resource import Resource
from ._workload import AFTER_CHECK, BEFORE_CHECK, Shape, Workload

LOCK = "lock"
BLOCKING = "blocking"
SLEEP = "sleep"
INLINE = "inline"

Step = tuple[str, Any]
Flow = Generator[Step, Any, None]

BACKOFF = 0.01
"""Pause after an acquire that failed at once (a refused connection...), so the loop does not spin."""


def worker_flow(rec: Recorder, workload: Workload, client: Any, resource: Resource, stop_at: float) -> Flow:
    while time.monotonic() < stop_at:
        shape = rec.pick()
        lock = client.lock(shape.name, shape.ttl, timeout=workload.wait, auto_renew=shape.renewed,
                           on_lost=rec.on_lost if shape.renewed else None, fenced=workload.fenced)
        queued = run_queue_wait()
        start = time.monotonic()
        try:
            taken = yield LOCK, lock.acquire
            result = "ok" if taken else "timeout"
        except LockError as exc:
            taken, result = False, outcome(exc)
        rec.call("acquire", shape.name, start, workload.wait, result, queued)
        if taken:
            yield from _section(rec, workload, lock, shape, resource)
        elif result != "timeout":
            yield SLEEP, BACKOFF


def _pause(rec: Recorder, resource: Resource, workload: Workload) -> Flow:
    start = time.monotonic()
    yield INLINE, lambda: stop_self(resource.raw, workload.paused_key)
    rec.paused(start)


def _section(rec: Recorder, workload: Workload, lock: Any, shape: Shape, resource: Resource) -> Flow:
    lease = lock.lease
    acquired_at = lease.acquired_at
    key = workload.counter_key(shape.name)
    read_start = time.monotonic()
    value: int | None = yield BLOCKING, lambda: resource.read(key, lease)
    read_end = time.monotonic()
    if value is not None:
        yield SLEEP, rec.work(shape)
        if rec.pauses_now(BEFORE_CHECK, shape):
            yield from _pause(rec, resource, workload)
    check_at = time.monotonic()
    held = value is not None and rec.holds(lease)
    expires_at = lease.expires_at
    if rec.pauses_now(AFTER_CHECK, shape, held):
        yield from _pause(rec, resource, workload)
    write_start = write_end = None
    write = SKIPPED if value is not None else REFUSED
    if held:
        assert value is not None
        write_start = time.monotonic()
        applied = yield BLOCKING, _writer(resource, key, value + 1, lease)
        write_end = time.monotonic()
        write = ACKED if applied else REFUSED
    expiry_at_release = lease.expires_at
    queued = run_queue_wait()
    released_at = time.monotonic()
    try:
        yield LOCK, lock.release
        result = "ok"
    except LockNotOwnedError:
        result = "not-owned"
    except LockError as exc:
        result = outcome(exc)
    rec.call("release", shape.name, released_at, workload.release_budget, result, queued)
    lost_at, lost_expiry = rec.lost(lease)
    rec.section(lock=shape.name, renewed=shape.renewed, fence=lease.fence, acquired_at=acquired_at,
                expires_at=expires_at, read_start=read_start, read_end=read_end, value_read=value,
                check_at=check_at, write_start=write_start, write_end=write_end, write=write,
                lost_at=lost_at, lost_expiry=lost_expiry, released_at=released_at,
                expiry_at_release=expiry_at_release)


def _writer(resource: Resource, key: str, value: int, lease: Any) -> Callable[[], bool]:
    return lambda: resource.write(key, value, lease)
