"""``ClusterLockClient``: locks on Redis Cluster, each lock's commands sent to the master of its
key's slot, bulk calls split per master. Everything else is ``LockClient``'s: the same flows,
the same Lock objects, the same errors.

Auto-renewal sends one script call per master and per batch of up to 1000 locks of one ttl
(``_flows/cluster_renewal``); claims (``acquire_many(..., limit=k)``) take from the masters in
turn (``_flows/cluster_claim``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turbolock._flows.claim import ClaimResult
from turbolock._flows.client_settings import CLIENT_KEYWORDS, DEFAULT_CHUNK_SIZE, DEFAULT_KEY_PREFIX
from turbolock._flows.cluster_claim import cluster_claim_flow
from turbolock._flows.cluster_routes import cluster_startup, startup_addresses
from turbolock._flows.renewal_book import Batch
from turbolock._flows.steps import Flow
from turbolock._sync.cluster import ClusterExecutor
from turbolock._sync.cluster_waker import ClusterWaker
from turbolock._wire import scripts as _scripts
from turbolock._wire.fair_scripts import FAIR_ACQUIRE_IN_SLOT
from turbolock._wire.outcomes import Encoder, Reencoder, ReplyHandler
from turbolock._wire.validate import Seconds
from turbolock.client import DEFAULT_MAX_CONNECTIONS, LockClient

NOT_YET = "is not supported on Redis Cluster yet"


class ClusterLockClient(LockClient):
    """A lock client for Redis Cluster; thread-safe, with a pool of connections per master.

    ``host``/``port`` (or ``from_url``'s URL) is one node of the cluster; ``startup_nodes``
    (URLs or ``(host, port)`` pairs) are more to ask for the slot map if that one is down.
    Credentials, TLS and timeouts apply to every node. The slot map is read on the first call,
    and again after a ``MOVED`` reply or a connection error (a failover).
    """

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
        self._exec = self._cluster = ClusterExecutor(options, self.core, self.key_prefix, max_connections,
                                                     options.timeout, self._chunk_size, startup)
        self._cluster.on_orphan = self._on_orphan
        self._exec_renewals = self._exec
        self._wakes_waiters = options.wake_waiters

    def _new_waker(self) -> ClusterWaker:
        return ClusterWaker(self.options, self._cluster, self.key_prefix)

    def _close_connections(self, deadline: float) -> None:
        self._cluster.close(deadline)

    def _forget_parent_locks(self) -> None:
        super()._forget_parent_locks()
        self._cluster.forget_after_fork()

    def _renew_batches(self, batches: list[Batch], encode: Encoder, reencode: Reencoder,
                       on_replies: ReplyHandler, deadline: float) -> list[object]:
        # The batches themselves, not the encoders: each is split per master and sent in the
        # form a cluster node accepts.
        return list(self._cluster.renew(batches, deadline))

    def _claim_many_flow(self, names: Sequence[str | bytes], ttl: Seconds, limit: int,
                         tokens: Sequence[bytes] | None, fenced: bool = False) -> Flow[ClaimResult]:
        return self._cluster.calls.counted(cluster_claim_flow(self, names, ttl, limit, tokens, fenced))
