"""Start-up nodes that hang, or that belong to another cluster and were down at the first call
(found in review). A hung node (it accepts the connection, never answers) is given half of what
is left of the call (the last one asked: all of it), as a hung Sentinel is: it spent the whole
first call, for the map and for the same-cluster check of the other start-up nodes. A node of
another cluster that was down when the first map was checked was asked later, once every master
of the client's cluster had failed a call, and its map taken: locks went to the other cluster. A
map that shares no node with the last one is refused now."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from turbolock import ClusterError, LockError
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

TTL = 10


@pytest.fixture
def hung_node() -> Iterator[tuple[str, int]]:
    """A TCP port that accepts connections (the kernel's backlog) and never answers: a node
    whose host hangs or is partitioned away."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield listener.getsockname()
    listener.close()


class Forwarder:
    """A TCP port forwarded to ``target`` once ``start()`` runs (refused before)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for s in self._sockets:
            s.close()


def test_a_hung_first_start_up_node_does_not_cost_the_first_call(
        cluster: RedisCluster, hung_node: tuple[str, int], key_prefix: str, core_name: str) -> None:
    with ClusterLockClient(hung_node[0], hung_node[1], startup_nodes=[cluster.url], key_prefix=key_prefix,
                           core=core_name, timeout=1.0) as client:
        started = time.monotonic()
        lease = client.try_acquire("hung-first-startup", TTL)
        took = time.monotonic() - started
        assert lease is not None and took < 1.0 + 0.3, f"first call failed after {took:.2f}s"
        assert client.release(lease)


def test_a_hung_extra_start_up_node_does_not_fail_the_first_call(
        cluster: RedisCluster, hung_node: tuple[str, int], key_prefix: str, core_name: str) -> None:
    with ClusterLockClient.from_url(cluster.url, startup_nodes=[hung_node], key_prefix=key_prefix,
                                    core=core_name, timeout=1.0) as client:
        try:
            lease = client.try_acquire("hung-extra-startup", TTL)
        except LockError as exc:
            pytest.fail(f"the first call failed: {type(exc).__name__}: {exc}")
        assert lease is not None and client.release(lease)


def test_a_start_up_node_of_another_cluster_down_at_first_is_never_used(
        cluster: RedisCluster, own_cluster: Callable[..., RedisCluster], key_prefix: str,
        core_name: str) -> None:
    """A stays healthy: each of its masters only fails one call (SIGSTOPped for that call)."""
    a = own_cluster(masters=3, replicas=0)
    b_node = Forwarder((cluster.nodes[0].host, cluster.nodes[0].port))  # a node of another cluster
    try:
        with ClusterLockClient.from_url(a.url, startup_nodes=[("127.0.0.1", b_node.port)],
                                        key_prefix=key_prefix, core=core_name, timeout=0.5) as client:
            first = client.try_acquire("first", TTL)  # map from A; B's node refused: skipped
            assert first is not None
            b_node.start()  # B's node is up from now on; A stays healthy but for the blips below
            for master in a.nodes[:3]:  # each of A's masters fails one call
                name = next(f"blip:{i}" for i in range(10000)
                            if a.master_of(key_slot(f"{key_prefix}blip:{i}".encode())).port == master.port)
                master.pause()
                try:
                    client.try_acquire(name, TTL)
                except LockError:
                    pass
                finally:
                    master.resume()
            try:
                lease = client.try_acquire("after-blip", TTL)
            except ClusterError:
                lease = None  # refused: fine
            key = f"{key_prefix}after-blip".encode()
            on_b = redis.Redis(host=cluster.master_of(key_slot(key)).host,
                               port=cluster.master_of(key_slot(key)).port)
            on_a = redis.Redis(host=a.master_of(key_slot(key)).host, port=a.master_of(key_slot(key)).port)
            try:
                held_on_b = on_b.get(key)
                held_on_a = on_a.get(key)
                on_b.delete(key)
            finally:
                on_b.close()
                on_a.close()
            assert held_on_b is None, (f"the lock was taken on the other cluster (B), A holds {held_on_a!r}; "
                                       f"client's masters now {client._cluster.routes.map.masters}")
            if lease is not None:
                assert held_on_a is not None
    finally:
        b_node.stop()
