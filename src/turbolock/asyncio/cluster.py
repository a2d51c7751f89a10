"""``AsyncClusterLockClient``: ``ClusterLockClient`` for asyncio. Each lock's commands go to the
master of its key's slot over that node's pipelining connection, bulk calls are split per master,
and auto-renewal sends each master its batches; the routing is the flows', the same as the
threaded client's. Everything else is ``AsyncLockClient``'s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from turbolock._aio.cluster import ClusterExecutor
from turbolock._aio.cluster_waker import AsyncClusterWaker
from turbolock._aio.pool import ConnectionPool
from turbolock._flows.claim import ClaimResult
from turbolock._flows.client_settings import (
    CLIENT_KEYWORDS,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_KEY_PREFIX,
    check_fenced,
)
from turbolock._flows.cluster_claim import cluster_claim_flow
from turbolock._flows.cluster_routes import cluster_startup, startup_addresses
from turbolock._flows.renewal_book import SETTLE_MARGIN, AutoRenew, Batch, OnLost
from turbolock._flows.single import acquire_result
from turbolock._flows.steps import Flow
from turbolock._wire import scripts as _scripts
from turbolock._wire.fair_scripts import FAIR_ACQUIRE_IN_SLOT
from turbolock._wire.outcomes import Encoder, Reencoder, ReplyHandler, Unconfirmed
from turbolock._wire.validate import Seconds, check_token, encode_name, ttl_ms
from turbolock.asyncio.client import DEFAULT_MAX_CONNECTIONS, AsyncLockClient
from turbolock.lease import Lease


class AsyncClusterLockClient(AsyncLockClient):
    """A lock client for Redis Cluster, for asyncio; share one per event loop. Arguments as
    ``ClusterLockClient``'s; ``max_connections`` pipelining connections per master."""

    _batches_keys = False
    """Keys of many slots cannot share a script call: bulk fenced acquires, releases and extends
    send one script call per key."""
    _fenced_acquire = _scripts.FENCED_ACQUIRE_IN_SLOT
    """A name's fence counter shares its key's slot (keys of many slots cannot share one)."""
    _fair_acquire = FAIR_ACQUIRE_IN_SLOT

    _own_keywords = (*CLIENT_KEYWORDS, "startup_nodes")

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, *, startup_nodes: Sequence[Any] = (),
                 key_prefix: str | bytes = DEFAULT_KEY_PREFIX, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, core: str | None = None, **connection: Any) -> None:
        self._startup = startup_addresses(startup_nodes)
        super().__init__(host, port, key_prefix=key_prefix, max_connections=max_connections,
                         chunk_size=chunk_size, core=core, **connection)

    def _open(self, max_connections: int) -> None:
        options = self.options
        startup = cluster_startup(options, self._startup)
        self._size = max_connections
        self._exec = self._cluster = ClusterExecutor(options, self.core, self.key_prefix, max_connections,
                                                     self._on_orphan, self._chunk_size, startup)
        self._cluster.on_new_loop = self._follow_running_loop
        self._wakes_waiters = options.wake_waiters

    def _server(self) -> str:
        return "the cluster's masters"

    def _new_waker(self) -> AsyncClusterWaker:
        return AsyncClusterWaker(self.options, self._cluster, self.key_prefix)

    @property
    def max_connections(self) -> int:
        return self._size

    def _adopt_running_loop(self) -> None:
        for node in self._cluster._nodes.values():
            node.pool.adopt_running_loop()

    def _connection_pools(self) -> list[ConnectionPool]:
        return [node.pool for node in self._cluster._nodes.values()]

    async def _close_connections(self, deadline: float = -math.inf) -> None:
        await self._cluster.close(deadline)

    def _forget_parent_locks(self) -> None:
        super()._forget_parent_locks()
        self._cluster.forget_after_fork()

    async def try_acquire(self, name: str | bytes, ttl: Seconds, *, token: bytes | None = None,
                          auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                          fenced: bool = False) -> Lease | None:
        """One attempt, on the master of the name's slot (see ``AsyncLockClient.try_acquire``)."""
        key = encode_name(name)
        ms = ttl_ms(ttl)
        tok = self._tokens.take() if token is None else check_token(token)
        policy = self._renew_policy(auto_renew, on_lost, ms)
        if fenced is not False and check_fenced(fenced, self.key_prefix, key, self.options.replicas_ack):
            return await self._acquire_by_exec(name, key, tok, ms, policy, on_lost, fenced=True,
                                               own_token=token is None)
        sent_at = time.monotonic()
        try:  # a cancelled caller: the node's executor releases what its command took
            reply = await self._cluster.set_nx_one(key, tok, ms, sent_at + self.options.timeout)
        except Unconfirmed as exc:
            raise self._acquire_lost([(name, key, tok, time.monotonic() + ms / 1000.0)], exc.cause,
                                     token is None) from None
        return acquire_result(self, reply, name, key, tok, ms, sent_at, policy, on_lost)

    def _claim_many_flow(self, names: Sequence[str | bytes], ttl: Seconds, limit: int,
                         tokens: Sequence[bytes] | None, fenced: bool = False) -> Flow[ClaimResult]:
        return self._cluster.calls.counted(cluster_claim_flow(self, names, ttl, limit, tokens, fenced))

    async def _renew_batches(self, batches: list[Batch], encode: Encoder, reencode: Reencoder,
                             on_replies: ReplyHandler, deadline: float) -> list[object]:
        # The batches themselves: each is split per master and sent in the form a node accepts,
        # each master's share answered by the round's deadline (the leases' expiry less the time
        # to settle: a loss is signalled before it), or marked unanswered. Cut short here only
        # if that failed: a round cut short loses what the masters that answered said.
        sending = self._cluster.renew(batches, deadline)
        return await self._round_by(sending, len(batches), deadline + SETTLE_MARGIN / 2)
