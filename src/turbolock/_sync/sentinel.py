"""Redis Sentinel for threads: a pool whose new connections go to the master the Sentinels name
(``_flows/sentinel_routes``), and the ``Server`` over it, which forgets that master when a call
to it fails or is refused with ``READONLY`` (and sends a refused write once more, to the new one:
it did not run)."""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from turbolock._flows.bulk_plan import OrphanTags, subset_orphans
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
from turbolock._sync.connection import Connection
from turbolock._sync.drive import run
from turbolock._sync.executor import Executor, settle_all
from turbolock._sync.pool import ConnectionPool
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import Encoder, NotSent, Reencoder, ReplyHandler, ReplyShape, bulk_budget
from turbolock._wire.slot_map import Address
from turbolock.errors import ClientClosedError, UnsentTimeoutError
from turbolock.options import ConnectionOptions

log = logging.getLogger("turbolock")


class SentinelNodes:
    """One connection per Sentinel, opened when first asked."""

    def __init__(self, options: ConnectionOptions, core: ModuleType, timeout: float) -> None:
        self._options = options
        self._core = core
        self._timeout = timeout
        self._nodes: dict[Address, Executor] = {}
        self._lock = threading.Lock()
        self._closed = False

    def node(self, address: Address) -> Executor:
        with self._lock:
            if self._closed:  # a question still under way (the watcher's) opens nothing more
                raise ClientClosedError()
            executor = self._nodes.get(address)
            if executor is None:
                options = dataclasses.replace(self._options, host=address[0], port=address[1])
                pool = ConnectionPool(options, self._core, b"", 1)
                executor = self._nodes[address] = Executor(pool, self._timeout, 1)
            return executor

    def forget_after_fork(self) -> None:
        """In a forked child: the lock may have been held by a parent thread that is not here
        (each node's pool forgets its connections itself)."""
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            nodes, self._nodes = list(self._nodes.values()), {}
        for node in nodes:
            node.pool.close()


class SentinelPool(ConnectionPool):
    """Connections to the master of ``routes.service``, checked with ``ROLE`` when opened."""

    def __init__(self, options: ConnectionOptions, core: ModuleType, key_prefix: bytes, max_connections: int,
                 routes: SentinelRoutes, sentinels: SentinelNodes) -> None:
        super().__init__(options, core, key_prefix, max_connections)
        self.routes = routes
        self.sentinels = sentinels
        self._asking = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()

    def _new_connection(self, deadline: float, finish: bool, generation: int) -> Connection:
        if self._watcher is None:
            self._start_watching()

        def open_checked(address: Address, deadline: float) -> Connection:
            # A retry's connection keeps the generation (and the slot) its get() counted: the
            # refusal before it dropped the pool, so it is closed when put back, not counted twice.
            return self._open_checked(address, deadline, generation)

        conn: Connection = run(open_master_flow(self.routes, self._ask, open_checked, deadline))
        return conn

    def _ask(self, deadline: float) -> Address:
        # One thread asks the Sentinels (the watcher, or a call); the others use its answer, waiting
        # for it no longer than their own deadline.
        if not self._asking.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise UnsentTimeoutError(f"the master of {self.routes.service!r} was still being asked of the "
                                "Sentinels at the call's deadline")
        try:
            return run(master_flow(self.routes, self.sentinels, deadline))
        finally:
            self._asking.release()

    def _open_checked(self, address: Address, deadline: float, generation: int) -> Connection:
        conn = Connection(dataclasses.replace(self.options, host=address[0], port=address[1]), self.core,
                          self.key_prefix)
        conn.generation = generation
        try:
            conn.connect(deadline)
            buf = conn.buffer
            buf.append_command((b"ROLE",))
            check_role(conn.request(buf.take(), deadline), address, self.routes.service)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, NotSent):  # late: ROLE never went out, nothing said against the master
                raise exc.cause from None
            if isinstance(exc, Exception):  # not an interrupt (Ctrl-C): nothing said against the master
                self.master_failed()
            raise
        return conn

    def _start_watching(self) -> None:
        with self._asking:
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="turbolock-sentinel", daemon=True)
                self._watcher.start()

    def _watch(self) -> None:
        """Ask the Sentinels every ``CHECK_INTERVAL``; when they name another master, drop the
        connections to the old one (see ``CHECK_INTERVAL``)."""
        stop = self._stop
        while not stop.wait(CHECK_INTERVAL):
            try:
                deadline = time.monotonic() + self.options.timeout
                with self._asking:
                    known = self.routes.master
                    named = run(ask_flow(self.routes, self.sentinels, deadline))
            except Exception as exc:  # the next call finds out for itself
                log.debug("turbolock: the Sentinels could not be asked: %s", exc)
                continue
            if known is not None and named != known:
                log.warning("turbolock: the Sentinels name %s:%d the master of %r now", named[0], named[1],
                            self.routes.service)
                self.drop_all()

    def _forget_parent_connections(self) -> None:
        super()._forget_parent_connections()
        self.sentinels.forget_after_fork()
        self._asking = threading.Lock()
        self._watcher = None  # the parent's thread is not in the child

    def close(self, deadline: float = -math.inf) -> None:
        self._stop.set()
        super().close(deadline)

    def master_failed(self) -> None:
        """A call to the master failed or was refused: ask the Sentinels again, and drop every
        connection to it."""
        self.routes.forget()
        self.drop_all()


class SentinelExecutor(Executor):
    """The ``Server`` of a Sentinel-managed master (``_flows/topology``); every call guarded by
    ``_flows/sentinel_routes``."""

    pool: SentinelPool

    def set_nx_one(self, key: bytes, token: bytes, ttl_ms: int, deadline: float) -> object:
        return run(guarded_flow(self.pool, Call(Executor.set_nx_one, (self, key, token, ttl_ms, deadline)),
                                deadline))

    def script_one(self, script: _scripts.Script, key: bytes, token: bytes, ttl_ms: int | None,
                   deadline: float | None = None) -> object:
        end = time.monotonic() + self.timeout if deadline is None else deadline
        return run(guarded_flow(self.pool, Call(Executor.script_one, (self, script, key, token, ttl_ms, end)),
                                end))

    def pttl_one(self, key: bytes, deadline: float | None = None) -> object:
        end = time.monotonic() + self.timeout if deadline is None else deadline
        return run(guarded_flow(self.pool, Call(Executor.pttl_one, (self, key, end)), end))

    def command_one(self, args: tuple[bytes, ...], deadline: float) -> object:
        return run(guarded_flow(self.pool, Call(Executor.command_one, (self, args, deadline)), deadline))

    def many(self, count: int, encode: Encoder, script: _scripts.Script | None = None,
             reencode: Reencoder | None = None, on_replies: ReplyHandler | None = None,
             deadline: float = math.inf, orphans: OrphanTags | None = None, keys: Any = None,
             durable: bool = False, shape: ReplyShape | None = None, read_only: bool = False) -> list[object]:
        """As ``Executor.many``; items refused with ``READONLY`` go once more to the master the
        Sentinels name next (``on_replies`` sees every reply at the end), within what is left of
        the call's budget."""
        ends = min(deadline, time.monotonic() + bulk_budget(self.timeout, count, self.chunk_size))

        def send(n: int, enc: Encoder, reenc: Reencoder | None, indices: Sequence[int] | None) -> CallStep:
            tags, items, by = orphans, shape, deadline
            if indices is not None:  # what the resent items may take, and answer
                tags = None if orphans is None else subset_orphans(orphans, indices)
                items = None if shape is None else shape.subset(indices)
                by = ends
            return Call(Executor.many, (self, n, enc, script, reenc, None, by),
                        {"durable": durable, "orphans": tags, "shape": items, "read_only": read_only})

        results = run(guarded_many_flow(self.pool, send, count, encode, reencode,
                                        abandon_answered(self.on_orphan, orphans), read_only))
        settle_all(on_replies, results, orphans, self.on_orphan)
        return results
