"""Redis Cluster for asyncio: the ``AsyncServer`` of the flows (``_flows/topology``) over one
pipelining ``Executor`` per node; the routing, the redirects and the renewal rounds are the
flows' (``_flows/cluster_routes``, ``_flows/cluster_renewal``), the same as the threaded
client's (``_sync/cluster``)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from turbolock._aio.drive import run
from turbolock._aio.executor import Executor
from turbolock._aio.pool import ConnectionPool, cancelling
from turbolock._aio.waiting import finished_within
from turbolock._flows.bulk_plan import OrphanHandler, OrphanTags
from turbolock._flows.closing import CallsUnderWay
from turbolock._flows.cluster_renewal import renew_flow
from turbolock._flows.cluster_routes import (
    ClusterRoutes,
    First,
    final,
    many_flow,
    pttl_flow,
    refresh_flow,
    refresh_waited_too_long,
    script_flow,
    set_nx_flow,
    settle_answered,
)
from turbolock._flows.renewal_book import Batch
from turbolock._flows.steps import Flow
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import NOT_SENT, Encoder, Reencoder, ReplyHandler
from turbolock._wire.slot_map import Address, SlotMap
from turbolock.errors import ClientClosedError
from turbolock.options import ConnectionOptions

T = TypeVar("T")


class ClusterExecutor:
    """The executors of the cluster's nodes (made on first use) and the routes between them."""

    def __init__(self, options: ConnectionOptions, core: Any, key_prefix: bytes, size: int,
                 on_orphan: OrphanHandler, chunk_size: int, startup: Sequence[Address]) -> None:
        self._options = options
        self._core = core
        self._key_prefix = key_prefix
        self._size = size
        self.on_orphan = on_orphan
        """Each master's pool's, and the cluster's own for a cancelled bulk acquire's finished shares."""
        self.on_new_loop: Callable[[], None] | None = None
        """Each master's pool's (``ConnectionPool.on_new_loop``)."""
        self.timeout = options.timeout
        self.chunk_size = chunk_size
        self.routes = ClusterRoutes(key_prefix, startup, options.ssl, core)
        self._nodes: dict[Address, Executor] = {}
        self._closed = False
        self.calls = CallsUnderWay()
        """Each call under way, its redirects and map reads included: close() lets them end
        first (a claim, which asks the masters' executors itself, counts itself in)."""
        self._refreshing: asyncio.Task[SlotMap] | None = None

    def node(self, address: Address) -> Executor:
        executor = self._nodes.get(address)
        if executor is None:
            if self._closed:  # no pool of a closed client comes back
                raise ClientClosedError()
            options = dataclasses.replace(self._options, host=address[0], port=address[1])
            pool = ConnectionPool(options, self._core, self._key_prefix, self._size, self.on_orphan)
            pool.on_new_loop = self.on_new_loop
            executor = self._nodes[address] = Executor(pool, self.chunk_size)
        return executor

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's calls under way are none of the child's to wait for.
        ``closing`` stays: close() sets it only once the client is closed (``closed`` came with
        the fork too), where its connections are closing."""
        self.calls = CallsUnderWay(self.calls.closing)

    def offers_set_ifeq(self) -> bool:
        """False: a bulk extend's keys are spread over the masters, and go as EXTEND scripts."""
        return False

    async def refresh(self, deadline: float) -> SlotMap:
        """Read the slot map, one refresh at a time: a task that finds one under way waits for it,
        no later than its own ``deadline``; when that read fails while this caller has time left
        (it ended by another call's deadline), this caller reads the map itself."""
        while True:
            task = self._refreshing
            if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
                if self._closed:
                    raise ClientClosedError()
                task = asyncio.get_running_loop().create_task(run(refresh_flow(self.routes, self, deadline)))
                self._refreshing = task
                try:
                    # Shielded: a caller cancelled while waiting must not cancel the read others
                    # wait on. The read is bounded by this caller's deadline already.
                    return await asyncio.shield(task)
                except asyncio.CancelledError:
                    if self._closed and task.cancelled() and not cancelling():
                        raise ClientClosedError() from None  # close() cancelled the read, not the caller
                    raise
            # Another call's read, never cancelled by this caller's wait.
            if not await finished_within(task, deadline - time.monotonic()):
                raise refresh_waited_too_long()
            if task.cancelled():
                if self._closed:
                    raise ClientClosedError()
                continue
            if task.exception() is None or time.monotonic() >= deadline:
                return task.result()  # its map, or its error when this caller has no time left either

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout

    async def _one(self, key: bytes, call: Callable[[Executor], Awaitable[object]],
                   flow: Callable[[First], Flow[object]]) -> object:
        """A key's command: tried on the master the map names (the common case, no flow), the
        flow taking over when there is no map or the reply is a redirect or a "try again"."""
        under_way = self.calls
        if under_way.closing:
            raise ClientClosedError()
        calls = under_way.entries
        calls.append(None)
        try:
            address = self.routes.master_of(key)
            first: First = None
            if address is not None:
                try:
                    reply = await call(self.node(address))
                except BaseException as exc:
                    self.routes.failed(address, exc)
                    raise
                if final(reply):
                    return reply
                first = (address, reply)
            return await run(flow(first))
        finally:
            calls.pop()

    async def set_nx_one(self, key: bytes, token: bytes, ttl_ms: int, deadline: float) -> object:
        return await self._one(key, lambda node: node.set_nx_one(key, token, ttl_ms, deadline),
                               lambda first: set_nx_flow(self.routes, self, key, token, ttl_ms, deadline,
                                                         first))

    async def script_one(self, script: _scripts.Script, key: bytes, token: bytes, ttl_ms: int | None,
                         deadline: float | None = None) -> object:
        end = self._deadline() if deadline is None else deadline
        return await self._one(key, lambda node: node.script_one(script, key, token, ttl_ms, end),
                               lambda first: script_flow(self.routes, self, script, key, token, ttl_ms, end,
                                                         first))

    async def pttl_one(self, key: bytes, deadline: float | None = None) -> object:
        end = self._deadline() if deadline is None else deadline
        return await self._one(key, lambda node: node.pttl_one(key, end),
                               lambda first: pttl_flow(self.routes, self, key, end, first))

    async def many(self, count: int, encode: Encoder, script: _scripts.Script | None = None,
                   reencode: Reencoder | None = None, on_replies: ReplyHandler | None = None,
                   orphans: OrphanTags | None = None, chunk_size: int | None = None,
                   keys: Sequence[bytes] = (), deadline: float = math.inf,
                   durable: bool = False, read_only: bool = False) -> list[object]:
        """Each master's items pipelined to it; replies in input order (``on_replies`` sees them
        all at the end). ``keys[i]`` is item i's key: the flows pass them for routing. A
        cancelled caller's acquires are released through ``orphans``, node by node.
        ``read_only``: a master's failure raises (see ``many_flow``)."""
        results: list[object] = [NOT_SENT] * count
        try:
            await run(self.calls.counted(many_flow(self.routes, self, count, encode, script, reencode, keys,
                                                    self.timeout, chunk_size or self.chunk_size, deadline,
                                                    orphans, results, durable, read_only)))
        except BaseException:
            settle_answered(results, on_replies)
            raise
        if on_replies is not None and count:
            on_replies(0, results)
        return results

    async def drive(self, flow: Flow[T]) -> T:
        """``flow`` run to its end on this front's driver: a flow's own step, to run sub-flows
        side by side in a ``Gather`` (one per master)."""
        return await run(flow)

    async def renew(self, batches: list[Batch], deadline: float) -> list[list[object]]:
        """A renewal round's batches, split per master (``_flows/cluster_renewal``)."""
        return await run(self.calls.counted(renew_flow(self.routes, self, batches, self.timeout,
                                                          self.chunk_size, deadline)))

    async def close(self, deadline: float = -math.inf) -> None:
        """Close every master's connections once the calls under way have ended, or at
        ``deadline`` (a release met by a redirect as the client closes follows it to the
        slot's new master, reading the map if it must), then the calls still in flight answered
        until ``deadline`` (``ConnectionPool.close``)."""
        await run(self.calls.ended_flow(deadline))
        self._closed = True
        task, self._refreshing = self._refreshing, None
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            task.cancel()
            await asyncio.wait([task])
        nodes = list(self._nodes.values())  # none is added now: node() refuses
        for node in nodes:  # every master refuses new calls while the first ones serve theirs
            node.pool.refuse()
        for node in nodes:  # the map stays while they are answered
            await node.pool.close(deadline)
        self._nodes = {}
