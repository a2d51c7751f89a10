"""The lock servers of a fault run: one redis-server (perhaps behind the loopback proxy, perhaps
persistent), three Redlock masters, or a Redis Cluster, each node a real redis-server on a free
loopback port, stopped by pid at the end."""

from __future__ import annotations

import contextlib
from types import TracebackType

import redis

from _netfaults import FaultProxy
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

PERSISTENT = ("appendonly yes", "appendfsync always")
"""What keeps a lock across a restart: every write in the append-only file before it is answered."""


def _raw(server: RedisServer) -> redis.Redis:
    return redis.Redis(host=server.host, port=server.port, socket_timeout=2)


class Topology:
    """``kind`` ("single" or "redlock"), the URLs the workers connect to, and the servers behind
    them (to fault, and to look at directly)."""

    kind = "single"

    def __init__(self, count: int = 1, *, persistent: bool = False, proxied: bool = False) -> None:
        config = PERSISTENT if persistent else ()
        self.persistent = persistent
        self.servers = [RedisServer(extra_config=config) for _ in range(count)]
        self.proxy: FaultProxy | None = None
        self._proxied = proxied

    @property
    def urls(self) -> tuple[str, ...]:
        if self.proxy is not None:
            return (self.proxy.url,)
        return tuple(server.url for server in self.servers)

    @property
    def label(self) -> str:
        label = "one server" if self.kind == "single" else f"Redlock, {len(self.servers)} masters"
        return label + (", appendfsync always" if self.persistent else "")

    def raw(self, index: int = 0) -> redis.Redis:
        """redis-py straight to server ``index`` (never through the proxy)."""
        return _raw(self.servers[index])

    def keys_left(self, prefix: str) -> list[str]:
        """The lock keys under ``prefix`` still on any server that is up (fence counters, which
        never expire, are named ``{prefix...}:fence`` and do not match)."""
        left: list[str] = []
        for server in self.servers:
            if server.running:
                with contextlib.closing(_raw(server)) as raw:
                    left += [f"{server.port}:{key.decode()}" for key in raw.scan_iter(match=f"{prefix}*")]
        return left

    def __enter__(self) -> Topology:
        try:
            for server in self.servers:
                server.start()
            if self._proxied:
                target = self.servers[0]
                self.proxy = FaultProxy(target.host, target.port).start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        for server in self.servers:
            server.stop()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class Masters(Topology):
    kind = "redlock"

    def __init__(self, count: int = 3) -> None:
        super().__init__(count)


class Cluster(Topology):
    """A Redis Cluster of 3 masters, each with a replica; the workers start from one node."""

    kind = "cluster"

    def __init__(self) -> None:
        self.persistent = False
        self.proxy = None
        self._proxied = False
        self.cluster = RedisCluster(masters=3, replicas=1)
        self.servers = self.cluster.nodes

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.cluster.url,)

    @property
    def label(self) -> str:
        return "Redis Cluster, 3 masters + 3 replicas"

    def keys_left(self, prefix: str) -> list[str]:
        """On the masters only: a replica keeps an expired key until its master's DEL arrives."""
        left: list[str] = []
        for server in self.servers:
            if server.running and "role:master" in self.cluster.cli(server, "info", "replication"):
                with contextlib.closing(_raw(server)) as raw:
                    left += [f"{server.port}:{key.decode()}" for key in raw.scan_iter(match=f"{prefix}*")]
        return left

    def __enter__(self) -> Cluster:
        self.cluster.start()
        return self

    def stop(self) -> None:
        self.cluster.stop()
