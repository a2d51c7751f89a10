"""A worker process of a fault run: its lock client (its core and front end by its index), the
two drivers of the shared loop (``_flow``), and what it reports back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from turbolock import LockClient, LockError, RedlockClient
from turbolock.asyncio import AsyncClusterLockClient, AsyncLockClient, AsyncRedlockClient
from turbolock.cluster import ClusterLockClient

from ._flow import BLOCKING, LOCK, SLEEP, Flow, worker_flow
from ._recorder import Recorder, outcome, run_queue_wait
from ._resource import Resource
from ._workload import Workload, flavour

START_LIMIT = 30.0
"""Longest wait at the starting barrier for the other workers and the test."""


def worker(index: int, workload: Workload, start: Any) -> dict[str, Any]:
    """The target of worker process ``index``: once every worker and the test passed ``start``
    (a barrier), runs for ``workload.run_for`` seconds; its report."""
    core, front = flavour(index)
    if front == "sync":
        return _run_sync(index, workload, core, start)
    return asyncio.run(_run_async(index, workload, core, start))


def _started(start: Any) -> float:
    start.wait(START_LIMIT)
    return time.monotonic()


def _options(workload: Workload, core: str) -> dict[str, Any]:
    options: dict[str, Any] = {"core": core, "key_prefix": workload.prefix, "timeout": workload.timeout,
                               "connect_timeout": workload.timeout}
    if workload.topology == "redlock":
        options.update(node_timeout=workload.node_timeout, retry_delay=workload.retry_delay)
    return options


def _run_sync(index: int, workload: Workload, core: str, start: Any) -> dict[str, Any]:
    resource = Resource(workload.resource_url, workload.fenced)
    client: LockClient | RedlockClient
    if workload.topology == "redlock":
        client = RedlockClient(list(workload.urls), **_options(workload, core))
    else:
        kind = ClusterLockClient if workload.topology == "cluster" else LockClient
        client = kind.from_url(workload.urls[0], **_options(workload, core))
    began = _started(start)
    rec = Recorder(index, workload, began)
    try:
        _drive(worker_flow(rec, workload, client, resource, began + workload.run_for))
    finally:
        queued = run_queue_wait()
        start = time.monotonic()
        try:
            client.close()
            result = "ok"
        except LockError as exc:
            result = outcome(exc)
        _closed(rec, workload, start, result, queued)
        resource.close()
    return rec.report(client.implementation, "sync")


async def _run_async(index: int, workload: Workload, core: str, start: Any) -> dict[str, Any]:
    resource = Resource(workload.resource_url, workload.fenced)
    client: AsyncLockClient | AsyncRedlockClient
    if workload.topology == "redlock":
        client = AsyncRedlockClient(list(workload.urls), **_options(workload, core))
    else:
        kind = AsyncClusterLockClient if workload.topology == "cluster" else AsyncLockClient
        client = kind.from_url(workload.urls[0], **_options(workload, core))
    began = _started(start)  # blocks the loop: nothing runs on it yet
    rec = Recorder(index, workload, began)
    try:
        await _adrive(worker_flow(rec, workload, client, resource, began + workload.run_for))
    finally:
        queued = run_queue_wait()
        start = time.monotonic()
        try:
            await client.close()
            result = "ok"
        except LockError as exc:
            result = outcome(exc)
        _closed(rec, workload, start, result, queued)
        resource.close()
    return rec.report(client.implementation, "async")


def _closed(rec: Recorder, workload: Workload, start: float, result: str, queued: float) -> None:
    """``close()`` keeps the call timeout on one server or a cluster (Redlock promises no bound for it)."""
    if workload.topology != "redlock":
        rec.call("close", "", start, workload.timeout, result, queued)


def _drive(flow: Flow) -> None:
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            kind, step = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration:
            return
        value, error = None, None
        try:
            if kind == SLEEP:
                time.sleep(step)
            else:
                value = step()
        except Exception as exc:
            error = exc


async def _adrive(flow: Flow) -> None:
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            kind, step = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration:
            return
        value, error = None, None
        try:
            if kind == SLEEP:
                await asyncio.sleep(step)
            elif kind == LOCK:
                value = await step()
            elif kind == BLOCKING:
                value = await asyncio.to_thread(step)
            else:
                value = step()
        except Exception as exc:
            error = exc
