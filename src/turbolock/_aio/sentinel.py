"""Redis Sentinel for asyncio: a pool whose new connections go to the master the Sentinels name
(``_flows/sentinel_routes``), and the ``AsyncServer`` over it, which forgets that master when a
call to it fails or is refused with ``READONLY`` (and sends a refused write once more, to the
new one: it did not run). The blocking twin is ``_sync/sentinel``; the logic is the flows'."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Sequence
from typing import Any

from turbolock._aio.connect import open_connection
from turbolock._aio.drive import run
from turbolock._aio.executor import Executor
from turbolock._aio.pool import ConnectionPool
from turbolock._aio.protocol import RedisProtocol
from turbolock._aio.waiting import done_by
from turbolock._flows.bulk_plan import OrphanHandler, OrphanTags, subset_orphans
from turbolock._flows.sentinel_routes import (
    CHECK_INTERVAL,
    SentinelRoutes,
    abandon_answered,
    ask_flow,
    check_role,
    guarded_flow,
    guarded_many_flow,
    master_flow,
    open_master_flow,
)
from turbolock._flows.steps import Call, CallStep
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import Encoder, NotSent, Reencoder, ReplyHandler, ReplyShape, bulk_budget
from turbolock._wire.slot_map import Address
from turbolock.errors import ClientClosedError, ConnectionError, LockError
from turbolock.options import ConnectionOptions

log = logging.getLogger("turbolock")

DIAGNOSIS_LEAD = 0.005
"""Seconds the master's connect ends before its first caller's deadline: the Sentinels' answers
(which failed, how) reach that caller, as the threaded client's do, not a bare "deadline passed"."""


def _no_orphans(tag: Any, reply: object) -> None:
    """A Sentinel is only asked questions: nothing to clean up after a lost reply."""


class SentinelNodes:
    """One connection per Sentinel, opened when first asked."""

    def __init__(self, options: ConnectionOptions, core: Any) -> None:
        self._options = options
        self._core = core
        self._nodes: dict[Address, Executor] = {}
        self._closed = False

    def node(self, address: Address) -> Executor:
        if self._closed:  # a question still under way opens nothing more
            raise ClientClosedError()
        executor = self._nodes.get(address)
        if executor is None:
            options = dataclasses.replace(self._options, host=address[0], port=address[1])
            pool = ConnectionPool(options, self._core, b"", 1, _no_orphans)
            executor = self._nodes[address] = Executor(pool, 1)
        return executor

    def pools(self) -> list[ConnectionPool]:
        return [node.pool for node in self._nodes.values()]

    async def close(self) -> None:
        self._closed = True
        nodes, self._nodes = list(self._nodes.values()), {}
        for node in nodes:
            await node.pool.close()


class SentinelPool(ConnectionPool):
    """Connections to the master of ``routes.service``, checked with ``ROLE`` when opened."""

    def __init__(self, options: ConnectionOptions, core: Any, key_prefix: bytes, size: int,
                 on_orphan: OrphanHandler, routes: SentinelRoutes, sentinels: SentinelNodes) -> None:
        super().__init__(options, core, key_prefix, size, on_orphan)
        self.routes = routes
        self.sentinels = sentinels
        self._watcher: asyncio.Task[None] | None = None

    @property
    def server(self) -> str:
        master = self.routes.master
        if master is None:
            return f"the master of {self.routes.service!r}"
        return f"{master[0]}:{master[1]} (the master of {self.routes.service!r})"

    async def _open_connection(self, until: float | None = None) -> RedisProtocol:
        watcher = self._watcher
        if not self._closed and (watcher is None or watcher.done()
                                 or watcher.get_loop() is not asyncio.get_running_loop()):
            # Not once close() began: a connect it serves would start one nobody cancels.
            self._watcher = asyncio.get_running_loop().create_task(self._watch())
        # One call timeout for the whole of it: the Sentinels asked, the connect and ROLE. One
        # connect at a time (the pool's): one question to the Sentinels.
        deadline = time.monotonic() + self.options.timeout
        if until is not None:  # a little before its first caller's (DIAGNOSIS_LEAD)
            left = until - asyncio.get_running_loop().time()
            deadline = min(deadline, time.monotonic() + left - DIAGNOSIS_LEAD)
        flow = open_master_flow(self.routes, self._ask, self._open_checked, deadline)
        conn: RedisProtocol = await run(flow)
        return conn

    async def _ask(self, deadline: float) -> Address:
        return await run(master_flow(self.routes, self.sentinels, deadline))

    async def _open_checked(self, address: Address, deadline: float) -> RedisProtocol:
        options = dataclasses.replace(self.options, host=address[0], port=address[1])
        try:
            conn = await done_by(open_connection(options, self.core, self.key_prefix, self.on_orphan),
                                 deadline, f"{options.address} (connecting)")
        except Exception:
            self.master_failed()
            raise
        try:
            conn.buffer.append_command((b"ROLE",))
            try:
                reply = await done_by(conn.submit(1), deadline, f"{options.address} (ROLE)")
            except NotSent as exc:
                raise exc.cause from None
            check_role(reply, address, self.routes.service)
        except BaseException as exc:
            conn.close(ConnectionError(f"connection to {options.address} is closed"))
            if isinstance(exc, Exception):  # not a cancelled connect: nothing said against the master
                self.master_failed()
            raise
        return conn

    async def _watch(self) -> None:
        """Ask the Sentinels every ``CHECK_INTERVAL``; when they name another master, drop the
        connections to the old one (see ``CHECK_INTERVAL``)."""
        while True:
            await asyncio.sleep(CHECK_INTERVAL)
            known = self.routes.master
            deadline = time.monotonic() + self.options.timeout
            try:
                named = await run(ask_flow(self.routes, self.sentinels, deadline))
            except LockError as exc:  # the next call finds out for itself
                log.debug("turbolock: the Sentinels could not be asked: %s", exc)
                continue
            if known is not None and named != known:
                log.warning("turbolock: the Sentinels name %s:%d the master of %r now", named[0], named[1],
                            self.routes.service)
                self.drop_all()

    async def _stop_background(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None and not watcher.done() and watcher.get_loop() is asyncio.get_running_loop():
            watcher.cancel()
            await asyncio.wait([watcher])

    def master_failed(self) -> None:
        """A call to the master failed or was refused: ask the Sentinels again, and drop every
        connection to it."""
        self.routes.forget()
        self.drop_all()


class SentinelExecutor(Executor):
    """The ``AsyncServer`` of a Sentinel-managed master (``_flows/topology``); every call guarded
    by ``_flows/sentinel_routes``."""

    pool: SentinelPool
    guarded = True

    def _deadline(self, deadline: float | None) -> float:
        return time.monotonic() + self.pool.options.timeout if deadline is None else deadline

    async def set_nx_one(self, key: bytes, token: bytes, ttl_ms: int, deadline: float | None = None,
                         own_token: bool = False) -> object:
        end = self._deadline(deadline)  # a resend after READONLY too: the call's one deadline
        step = Call(Executor.set_nx_one, (self, key, token, ttl_ms, end, own_token))
        return await run(guarded_flow(self.pool, step, end))

    async def pttl_one(self, key: bytes, deadline: float | None = None) -> object:
        end = self._deadline(deadline)
        step = Call(Executor.pttl_one, (self, key, end))
        return await run(guarded_flow(self.pool, step, end))

    async def script_one(self, script: _scripts.Script, key: bytes, token: bytes,
                         ttl_ms: int | None, deadline: float | None = None) -> object:
        end = self._deadline(deadline)
        step = Call(Executor.script_one, (self, script, key, token, ttl_ms, end))
        return await run(guarded_flow(self.pool, step, end))

    async def many(self, count: int, encode: Encoder, script: _scripts.Script | None = None,
                   reencode: Reencoder | None = None, on_replies: ReplyHandler | None = None,
                   orphans: OrphanTags | None = None, chunk_size: int | None = None,
                   keys: Any = None, deadline: float = math.inf, durable: bool = False,
                   shape: ReplyShape | None = None, read_only: bool = False) -> list[object]:
        """As ``Executor.many``; items refused with ``READONLY`` go once more to the master the
        Sentinels name next (``on_replies`` sees every reply at the end), within what is left of
        the call's budget."""
        size = self.chunk_size if chunk_size is None else chunk_size
        ends = min(deadline, time.monotonic() + bulk_budget(self.pool.options.timeout, count, size))

        def send(n: int, enc: Encoder, reenc: Reencoder | None, indices: Sequence[int] | None) -> CallStep:
            tags, items, by = orphans, shape, deadline
            if indices is not None:  # what the resent items may take, and answer
                tags = None if orphans is None else subset_orphans(orphans, indices)
                items = None if shape is None else shape.subset(indices)
                by = ends
            return Call(Executor.many, (self, n, enc, script, reenc, None, tags, chunk_size),
                        {"durable": durable, "shape": items, "deadline": by, "read_only": read_only})

        results = await run(guarded_many_flow(self.pool, send, count, encode, reencode,
                                              abandon_answered(self.pool.on_orphan, orphans), read_only))
        if on_replies is not None and count:
            on_replies(0, results)
        return results
