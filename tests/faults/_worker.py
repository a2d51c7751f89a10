"""A worker process of a fault run: its lock client (its core and front end by its index), the
two drivers of the shared loop (``_flow``), and what it reports back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from turbolock import LockClient, LockError, RedlockClient
from turbolock.asyncio import AsyncClusterLockClient, AsyncLockClient, AsyncRedlockClient
from turbolock.cluster import ClusterLockClient

from ._flow import BLOCKING, LOCK, SLEEP, Flow, Step, worker_flow
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


def _client(workload: Workload, core: str, redlock: Any, cluster: Any, single: Any) -> Any:
    """The worker's lock client, of the classes of its front end (threaded or asyncio)."""
    options: dict[str, Any] = {"core": core, "key_prefix": workload.prefix, "timeout": workload.timeout,
                               "connect_timeout": workload.timeout}
    if workload.topology == "redlock":
        options.update(node_timeout=workload.node_timeout, retry_delay=workload.retry_delay)
        return redlock(list(workload.urls), **options)
    kind = cluster if workload.topology == "cluster" else single
    return kind.from_url(workload.urls[0], **options)


def _run_sync(index: int, workload: Workload, core: str, start: Any) -> dict[str, Any]:
    resource = Resource(workload.resource_url, workload.fenced)
    client: LockClient | RedlockClient = _client(workload, core, RedlockClient, ClusterLockClient, LockClient)
    began = _started(start)
    rec = Recorder(index, workload, began)
    try:
        _drive(worker_flow(rec, workload, client, resource, began + workload.run_for))
    finally:
        with _closing(rec, workload, resource):
            client.close()
    return rec.report(client.implementation, "sync")


async def _run_async(index: int, workload: Workload, core: str, start: Any) -> dict[str, Any]:
    resource = Resource(workload.resource_url, workload.fenced)
    client: AsyncLockClient | AsyncRedlockClient = _client(workload, core, AsyncRedlockClient,
                                                           AsyncClusterLockClient, AsyncLockClient)
    began = _started(start)  # blocks the loop: nothing runs on it yet
    rec = Recorder(index, workload, began)
    try:
        await _adrive(worker_flow(rec, workload, client, resource, began + workload.run_for))
    finally:
        with _closing(rec, workload, resource):
            await client.close()
    return rec.report(client.implementation, "async")


@contextmanager
def _closing(rec: Recorder, workload: Workload, resource: Resource) -> Iterator[None]:
    """Around the client's ``close()``: records it (a ``LockError`` is its outcome), then closes
    ``resource``. ``close()`` keeps the call timeout on one server or a cluster (Redlock promises
    no bound for it)."""
    queued = run_queue_wait()
    start = time.monotonic()
    try:
        yield
        result = "ok"
    except LockError as exc:
        result = outcome(exc)
    if workload.topology != "redlock":
        rec.call("close", "", start, workload.timeout, result, queued)
    resource.close()


def _next(flow: Flow, value: Any, error: Exception | None) -> Step | None:
    """The flow's next step, given the last one's value or its error (thrown in); None once it ended."""
    try:
        return flow.throw(error) if error is not None else flow.send(value)
    except StopIteration:
        return None


def _drive(flow: Flow) -> None:
    value: Any = None
    error: Exception | None = None
    while (step := _next(flow, value, error)) is not None:
        kind, call = step
        value, error = None, None
        try:
            if kind == SLEEP:
                time.sleep(call)
            else:
                value = call()
        except Exception as exc:
            error = exc


async def _adrive(flow: Flow) -> None:
    value: Any = None
    error: Exception | None = None
    while (step := _next(flow, value, error)) is not None:
        kind, call = step
        value, error = None, None
        try:
            if kind == SLEEP:
                await asyncio.sleep(call)
            elif kind == LOCK:
                value = await call()
            elif kind == BLOCKING:
                value = await asyncio.to_thread(call)
            else:
                value = call()
        except Exception as exc:
            error = exc
