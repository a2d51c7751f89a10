"""A throwaway Redis Cluster on loopback, for the tests, the benchmarks and the demo: real
``redis-server --cluster-enabled yes`` processes joined by ``redis-cli --cluster create``.

Each node's cluster bus listens on its port + 10000, so every port here is at most 55535 and
its bus port is free too. No persistence; ``stop()`` stops every node by pid and removes its
directory.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from turbolock.free_ports import NoFreePortError, claim_free_port
from turbolock.redis_server import RedisServer, RedisServerError, redis_cli
from turbolock.server_binaries import binaries

BUS_OFFSET = 10000
LOWEST_PORT = 20000
HIGHEST_PORT = 32767 - BUS_OFFSET
"""Node ports 20000-22767, bus ports 30000-32767: below Linux's ephemeral range (32768 on), so
an outgoing connection of the same host cannot take a node's port between the probe and the
node's bind (seen: "Address already in use" at a node's start)."""


def free_cluster_port(taken: Sequence[int] = ()) -> int:
    """A port for a cluster node: free, at most 55535, and its bus port (+10000) free too."""
    try:
        return claim_free_port(LOWEST_PORT, HIGHEST_PORT, also_free=[BUS_OFFSET],
                               avoid=[*taken, *(port + BUS_OFFSET for port in taken)])
    except NoFreePortError as error:
        raise RedisServerError(f"no free port pair (port, port + {BUS_OFFSET}) for a cluster node") from error


@dataclass(frozen=True)
class ClusterTls:
    """Files of a cluster that speaks only TLS: the CA that signed the others, the nodes' server
    certificate (valid for 127.0.0.1) and key, and the client certificate and key a node shows
    another's cluster bus (which always asks for one). Nodes ask clients for none."""

    ca: str
    cert: str
    key: str
    client_cert: str
    client_key: str


class RedisCluster:
    """``masters`` masters, each with ``replicas`` replicas, every slot assigned.

    ``node_timeout`` (ms) is the cluster's failure detection time (``cluster-node-timeout``).
    ``nodes`` are the RedisServers, masters first as created; ``urls`` their URLs. With ``tls``
    every port (clients, replication, the cluster bus) speaks TLS only.
    """

    def __init__(self, masters: int = 3, replicas: int = 1, *, node_timeout: int = 1500,
                 extra_config: Sequence[str] = (), startup_timeout: float = 30.0,
                 tls: ClusterTls | None = None) -> None:
        if masters < 3:
            raise RedisServerError("redis-cli --cluster create needs at least 3 masters")
        self.masters = masters
        self.replicas = replicas
        self.node_timeout = node_timeout
        self.startup_timeout = startup_timeout
        ports: list[int] = []
        for _ in range(masters * (1 + replicas)):
            ports.append(free_cluster_port(ports))
        config = [
            "cluster-enabled yes",
            "cluster-config-file nodes.conf",
            f"cluster-node-timeout {node_timeout}",
            "cluster-require-full-coverage yes",
            "repl-diskless-sync-delay 0",  # a replica is in sync (and can take over) at once
            *extra_config,
        ]
        self.tls = tls
        self.nodes = [RedisServer(port=port, extra_config=[*config, *_tls_config(tls, port)])
                      for port in ports]
        if tls is not None:
            for node in self.nodes:
                node.cli_arguments = ["--tls", "--cacert", tls.ca]

    @property
    def urls(self) -> list[str]:
        if self.tls is not None:
            return [f"rediss://{node.host}:{node.port}/0" for node in self.nodes]
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        """One node's URL: a cluster client finds the others from it."""
        return self.urls[0]

    def start(self) -> RedisCluster:
        cli = binaries().cli
        if shutil.which(cli) is None:
            raise RedisServerError(f"{cli} is not installed (apt-get install redis-tools)")
        try:
            for node in self.nodes:
                node.start()
            addresses = [f"{node.host}:{node.port}" for node in self.nodes]
            created = subprocess.run(
                [cli, *self.nodes[0].cli_arguments, "--cluster", "create", *addresses,
                 "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                capture_output=True, text=True, timeout=self.startup_timeout)
            if created.returncode != 0:
                raise RedisServerError(f"redis-cli --cluster create failed: {created.stdout[-1500:]}"
                                       f"{created.stderr[-500:]}")
            self.wait_ok()
        except BaseException:
            self.stop()
            raise
        return self

    def cli(self, node: RedisServer, *args: str, timeout: float = 10.0) -> str:
        """``redis-cli`` against one node; its output."""
        return redis_cli(node, *args, timeout=timeout)

    def wait_ok(self, timeout: float | None = None) -> None:
        """Until every running node says ``cluster_state:ok`` and knows every other node, and
        every running replica is in sync with its master (only then can it take over)."""
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        running = [node for node in self.nodes if node.running]
        while True:
            try:
                if all(self._ok(node, len(running)) for node in running):
                    return
            except (OSError, subprocess.SubprocessError):
                pass
            if time.monotonic() > deadline:
                info = self.cli(running[0], "cluster", "info")
                raise RedisServerError(f"the cluster did not become ok in time: {info}")
            time.sleep(0.1)

    def _ok(self, node: RedisServer, count: int) -> bool:
        info = self.cli(node, "cluster", "info")
        if "cluster_state:ok" not in info:
            return False
        replication = self.cli(node, "info", "replication")
        if "role:slave" in replication and "master_link_status:up" not in replication:
            return False
        known = [line for line in self.cli(node, "cluster", "nodes").splitlines() if line.strip()]
        return len([line for line in known if "fail" not in line.split()[2]]) >= count

    def master_of(self, slot: int) -> RedisServer:
        """The node serving ``slot`` now, as the cluster itself says."""
        for line in self.cli(self._any_running(), "cluster", "nodes").splitlines():
            fields = line.split()
            if len(fields) < 9 or "master" not in fields[2] or "fail" in fields[2]:
                continue
            for part in fields[8:]:
                if part.startswith("["):
                    continue
                low, _, high = part.partition("-")
                if int(low) <= slot <= int(high or low):
                    port = int(fields[1].split(":")[1].split("@")[0])
                    return next(node for node in self.nodes if node.port == port)
        raise RedisServerError(f"no master serves slot {slot}")

    def _any_running(self) -> RedisServer:
        return next(node for node in self.nodes if node.running)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        ports = [node.port for node in self.nodes]
        return f"RedisCluster(masters={self.masters}, replicas={self.replicas}, ports={ports})"


def _tls_config(tls: ClusterTls | None, port: int) -> list[str]:
    """A node's TLS lines: TLS on ``port`` instead of plain TCP, and for replication and the bus."""
    if tls is None:
        return []
    return ["port 0", f"tls-port {port}", "tls-cluster yes", "tls-replication yes", "tls-auth-clients no",
            f"tls-cert-file {tls.cert}", f"tls-key-file {tls.key}", f"tls-ca-cert-file {tls.ca}",
            f"tls-client-cert-file {tls.client_cert}", f"tls-client-key-file {tls.client_key}"]
