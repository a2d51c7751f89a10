"""The seam between the flows and the servers: which connection a key's command goes to, and
how the replies come back combined. A flow names what it needs; a topology answers it, blocking
(``_sync``, ``_redlock``) or awaited (``_aio``). A client is a topology, a driver and the flows.

Two shapes exist, each with a threaded and an asyncio implementation:

- ``Server``: every key on one server (``client._exec``: ``_sync.executor.Executor``,
  ``_aio.executor.Executor``). Flows reach it with ``Call(client._exec.<method>, ...)``; replies
  come back one per item, in input order, ``UNKNOWN`` or ``NOT_SENT`` where none came.
- ``Masters``: every key on each of N independent masters, decided by quorum (``Call`` of the
  client's ``_fan_one`` or ``_fan_many``: ``_redlock.fanout`` over blocking sockets,
  ``_aio.fanout`` over asyncio connections); replies come back per master.

Redis Cluster fits the first shape: a ``Server`` (``_sync.cluster.ClusterExecutor``) that
sends each key's command to the master of its slot and whose ``many`` groups the items by
their ``keys`` (which the flows pass), sends each master its share and puts the replies back
in input order, so the single-server flows run on it unchanged; the routing and the redirects
are written once (``cluster_routes``). Sentinel is a ``Server`` too (``_sync.sentinel``,
``_aio.sentinel``): its connections are opened to the master the Sentinels name, and a call
that fails or is refused as READONLY sends it back to them (``sentinel_routes``).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from turbolock._wire.outcomes import Encoder, Reencoder, ReplyHandler
from turbolock._wire.scripts import Script


class Server(Protocol):
    """Every key on one server, for threads (``client._exec`` of a ``LockClient``)."""

    chunk_size: int

    def offers_set_ifeq(self) -> bool:
        """Whether the server offers ``SET ... IFEQ`` (``_wire.set_ifeq``), as its newest
        connection's handshake said: a bulk extend then sends one per lease, not ``RENEW_MANY``.
        False where the keys are on several servers (Redis Cluster), which keeps the scripts."""

    def set_nx_one(self, key: bytes, token: bytes, ttl_ms: int, deadline: float) -> object:
        """``SET NX PX`` of one lock; ``Unconfirmed`` when it was written and no reply came."""

    def pttl_one(self, key: bytes, deadline: float | None = None) -> object:
        """PTTL of one key."""

    def script_one(self, script: Script, key: bytes, token: bytes, ttl_ms: int | None,
                   deadline: float | None = None) -> object:
        """EVALSHA of a single-key script (loaded again on NOSCRIPT); ``Unconfirmed`` when it
        was written and no reply came."""

    def many(self, count: int, encode: Encoder, script: Script | None = None,
             reencode: Reencoder | None = None, on_replies: ReplyHandler | None = None,
             deadline: float = math.inf, orphans: Any = None, keys: Any = None,
             durable: bool = False) -> list[object]:
        """A reply per item in input order, pipelined in chunks; ``keys[i]`` is item i's key.
        ``durable`` (acquires): with ``replicas_ack``, an ``OK`` too few replicas acknowledged
        comes back as ``NOT_DURABLE``, as from ``set_nx_one``."""


class AsyncServer(Protocol):
    """``Server`` for asyncio (``client._exec`` of an ``AsyncLockClient``)."""

    chunk_size: int

    def offers_set_ifeq(self) -> bool:
        """As ``Server.offers_set_ifeq`` (a plain call: it only reads what a handshake said)."""

    async def pttl_one(self, key: bytes) -> object:
        """PTTL of one key."""

    async def script_one(self, script: Script, key: bytes, token: bytes, ttl_ms: int | None) -> object:
        """EVALSHA of a single-key script; ``Unconfirmed`` when it was written and no reply came."""

    async def many(self, count: int, encode: Encoder, script: Script | None = None,
                   reencode: Reencoder | None = None, on_replies: ReplyHandler | None = None,
                   orphans: Any = None, chunk_size: int | None = None, *,
                   durable: bool = False) -> list[object]:
        """A reply per item in input order, pipelined in chunks; a cancelled caller's acquires
        are released through ``orphans``."""
