"""Redis Cluster for threads: the ``Server`` of the flows (``_flows/topology``) over one
``Executor`` per node; the routing and the redirects are ``_flows/cluster_routes``'s."""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TypeVar

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
from turbolock._sync.drive import run
from turbolock._sync.executor import Executor, settle_all
from turbolock._sync.pool import ConnectionPool
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import NOT_SENT, Encoder, Reencoder, ReplyHandler
from turbolock._wire.slot_map import Address, SlotMap
from turbolock.errors import ClientClosedError
from turbolock.options import ConnectionOptions

T = TypeVar("T")


class ClusterExecutor:
    """The executors of the cluster's nodes (made on first use) and the routes between them."""

    def __init__(self, options: ConnectionOptions, core: ModuleType, key_prefix: bytes, max_connections: int,
                 timeout: float, chunk_size: int, startup: Sequence[Address]) -> None:
        self._options = options
        self._core = core
        self._key_prefix = key_prefix
        self._max_connections = max_connections
        self.timeout = timeout
        self.chunk_size = chunk_size
        self.routes = ClusterRoutes(key_prefix, startup, options.ssl, core)
        self._nodes: dict[Address, Executor] = {}
        self._nodes_lock = threading.Lock()
        self._closed = False
        self.calls = CallsUnderWay()
        """Each call under way, its redirects and map reads included: close() lets them end
        first (a claim, which asks the masters' executors itself, counts itself in)."""
        self._refresh_lock = threading.Lock()
        self.on_orphan: OrphanHandler | None = None
        """Each master's executor's (``Executor.on_orphan``)."""

    def node(self, address: Address) -> Executor:
        executor = self._nodes.get(address)
        if executor is None:
            with self._nodes_lock:
                executor = self._nodes.get(address)
                if executor is None:
                    if self._closed:  # no pool of a closed client comes back
                        raise ClientClosedError()
                    options = dataclasses.replace(self._options, host=address[0], port=address[1])
                    pool = ConnectionPool(options, self._core, self._key_prefix, self._max_connections)
                    executor = self._nodes[address] = Executor(pool, self.timeout, self.chunk_size,
                                                               self.on_orphan)
        return executor

    def refresh(self, deadline: float) -> SlotMap:
        """Read the slot map; a thread that waited for another's refresh uses its map, and
        waits for it no later than its own ``deadline``."""
        seen = self.routes.map
        if not self._refresh_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise refresh_waited_too_long()
        try:
            routes = self.routes
            if routes.map is not None and routes.map is not seen and not routes.stale:
                return routes.map
            return run(refresh_flow(routes, self, deadline))
        finally:
            self._refresh_lock.release()

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's calls under way are none of the child's to wait for.
        ``closing`` stays: close() sets it only once the client is closed (``closed`` came with
        the fork too), where its connections are closing. The locks may have been held by parent
        threads that are not here (one reading the slot map, one opening a node's pool)."""
        self.calls = CallsUnderWay(self.calls.closing)
        self._refresh_lock = threading.Lock()
        self._nodes_lock = threading.Lock()

    def offers_set_ifeq(self) -> bool:
        """False: a bulk extend's keys are spread over the masters, and go as EXTEND scripts."""
        return False

    def _deadline(self, deadline: float | None) -> float:
        return time.monotonic() + self.timeout if deadline is None else deadline

    def _one(self, key: bytes, call: Callable[[Executor], object],
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
                    reply = call(self.node(address))
                except BaseException as exc:
                    self.routes.failed(address, exc)
                    raise
                if final(reply):
                    return reply
                first = (address, reply)
            return run(flow(first))
        finally:
            calls.pop()

    def set_nx_one(self, key: bytes, token: bytes, ttl_ms: int, deadline: float) -> object:
        return self._one(key, lambda node: node.set_nx_one(key, token, ttl_ms, deadline),
                         lambda first: set_nx_flow(self.routes, self, key, token, ttl_ms, deadline, first))

    def script_one(self, script: _scripts.Script, key: bytes, token: bytes, ttl_ms: int | None,
                   deadline: float | None = None) -> object:
        end = self._deadline(deadline)
        return self._one(key, lambda node: node.script_one(script, key, token, ttl_ms, end),
                         lambda first: script_flow(self.routes, self, script, key, token, ttl_ms, end, first))

    def pttl_one(self, key: bytes, deadline: float | None = None) -> object:
        end = self._deadline(deadline)
        return self._one(key, lambda node: node.pttl_one(key, end),
                         lambda first: pttl_flow(self.routes, self, key, end, first))

    def many(self, count: int, encode: Encoder, script: _scripts.Script | None = None,
             reencode: Reencoder | None = None, on_replies: ReplyHandler | None = None,
             deadline: float = math.inf, orphans: OrphanTags | None = None, keys: Sequence[bytes] = (),
             durable: bool = False, read_only: bool = False) -> list[object]:
        """Each master's items pipelined to it; replies in input order (``on_replies`` sees them
        all at the end). ``keys[i]`` is item i's key: the flows pass them for routing.
        ``read_only``: a master's failure raises (see ``many_flow``)."""
        results: list[object] = [NOT_SENT] * count
        try:
            run(self.calls.counted(many_flow(self.routes, self, count, encode, script, reencode, keys,
                                               self.timeout, self.chunk_size, deadline, orphans, results,
                                               durable, read_only)))
        except BaseException:
            settle_answered(results, on_replies)
            raise
        settle_all(on_replies, results, orphans, self.on_orphan)
        return results

    def drive(self, flow: Flow[T]) -> T:
        """``flow`` run to its end on this front's driver: a flow's own step, to run sub-flows
        side by side in a ``Gather`` (one per master)."""
        return run(flow)

    def renew(self, batches: list[Batch], deadline: float) -> list[list[object]]:
        """A renewal round's batches, split per master (``_flows/cluster_renewal``)."""
        return run(self.calls.counted(renew_flow(self.routes, self, batches, self.timeout, self.chunk_size,
                                                   deadline)))

    def close(self, deadline: float = -math.inf) -> None:
        """Refuse new calls, let those under way end (a release met by a redirect as the client
        closes follows it to the slot's new master), then close every master's connections;
        all by ``deadline``, a call still waiting for a connection served until then
        (``ConnectionPool.close``)."""
        run(self.calls.ended_flow(deadline))
        with self._nodes_lock:
            self._closed = True
            nodes = list(self._nodes.values())
        for node in nodes:  # every master refuses new calls while the first ones serve theirs
            node.pool.refuse()
        for node in nodes:
            node.pool.close(deadline)
        with self._nodes_lock:
            self._nodes = {}
