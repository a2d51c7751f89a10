"""A throwaway master with replicas watched by Sentinels, on loopback, for the tests and the demo:
real ``redis-server`` processes (a Sentinel is ``redis-server --sentinel``), no persistence,
stopped by pid with their directories removed.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from types import TracebackType

from turbolock.redis_server import RedisServer, RedisServerError, redis_cli
from turbolock.server_binaries import binaries


class RedisSentinel:
    """A master named ``service`` with ``replicas`` replicas and ``sentinels`` Sentinels (a
    majority of them agree a master is down after ``down_after`` ms)."""

    def __init__(self, replicas: int = 1, sentinels: int = 3, *, service: str = "turbolock",
                 down_after: int = 1000, failover_timeout: int = 5000, extra_config: Sequence[str] = (),
                 startup_timeout: float = 30.0) -> None:
        self.service = service
        self.down_after = down_after
        self.failover_timeout = failover_timeout
        self.startup_timeout = startup_timeout
        base = ["repl-diskless-sync-delay 0", *extra_config]
        self.master = RedisServer(extra_config=base)
        self.replicas = [RedisServer(extra_config=[*base, f"replicaof {self.master.host} {self.master.port}"])
                         for _ in range(replicas)]
        quorum = sentinels // 2 + 1
        self.sentinels = [RedisServer(arguments=["--sentinel"], extra_config=[
            f"sentinel monitor {service} {self.master.host} {self.master.port} {quorum}",
            f"sentinel down-after-milliseconds {service} {down_after}",
            f"sentinel failover-timeout {service} {failover_timeout}",
            f"sentinel parallel-syncs {service} 1",
        ]) for _ in range(sentinels)]

    @property
    def servers(self) -> list[RedisServer]:
        """The data nodes: the first master, then the replicas (roles change with failovers)."""
        return [self.master, *self.replicas]

    @property
    def sentinel_urls(self) -> list[str]:
        return [f"redis://{node.host}:{node.port}" for node in self.sentinels]

    def start(self) -> RedisSentinel:
        if shutil.which(binaries().cli) is None:
            raise RedisServerError(f"{binaries().cli} is not installed (apt-get install redis-tools)")
        try:
            for node in self.servers:
                node.start()
            self._wait(lambda: all(self._in_sync(replica) for replica in self.replicas), "replicas in sync")
            if self.replicas:
                self._wait(self._acknowledging, "replicas acknowledging writes")
            for sentinel in self.sentinels:
                sentinel.start()
            self._wait(self._sentinels_agree, "Sentinels that know each other and every replica")
        except BaseException:
            self.stop()
            raise
        return self

    def cli(self, node: RedisServer, *args: str, timeout: float = 10.0) -> str:
        """``redis-cli`` against one node; its output."""
        return redis_cli(node, *args, timeout=timeout)

    def master_port(self) -> int:
        """The master's port as the first running Sentinel says."""
        sentinel = next(node for node in self.sentinels if node.running)
        lines = self.cli(sentinel, "sentinel", "get-master-addr-by-name", self.service).split()
        return int(lines[1])

    def node_at(self, port: int) -> RedisServer:
        return next(node for node in self.servers if node.port == port)

    def _in_sync(self, replica: RedisServer) -> bool:
        return "master_link_status:up" in self.cli(replica, "info", "replication")

    def _acknowledging(self) -> bool:
        """Whether every replica acknowledges a write at once (``WAIT``): after the first sync a
        replica may take a second more to, and a test of ``replicas_ack`` would see it missing."""
        done = subprocess.run([binaries().cli, "-h", self.master.host, "-p", str(self.master.port)],
                              input=f"SET turbolock:started 1 PX 1000\nWAIT {len(self.replicas)} 100\n",
                              capture_output=True, text=True, timeout=10)
        return done.stdout.split()[-1:] == [str(len(self.replicas))]

    def _sentinels_agree(self) -> bool:
        for sentinel in self.sentinels:
            fields = self.cli(sentinel, "sentinel", "master", self.service).split()
            info = dict(zip(fields[::2], fields[1::2], strict=False))
            if (info.get("num-other-sentinels") != str(len(self.sentinels) - 1)
                    or info.get("num-slaves") != str(len(self.replicas))):
                return False
        return True

    def wait_failover(self, old_port: int, timeout: float = 30.0) -> RedisServer:
        """Until every Sentinel names a master other than ``old_port`` and it says it is one."""
        def moved() -> bool:
            ports = set()
            for sentinel in self.sentinels:
                if not sentinel.running:
                    continue
                lines = self.cli(sentinel, "sentinel", "get-master-addr-by-name", self.service).split()
                if len(lines) < 2:
                    return False
                ports.add(int(lines[1]))
            if len(ports) != 1 or old_port in ports:
                return False
            return "role:master" in self.cli(self.node_at(ports.pop()), "info", "replication")

        self._wait(moved, "a failover", timeout)
        return self.node_at(self.master_port())

    def _wait(self, done: object, what: str, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        while True:
            try:
                if done():  # type: ignore[operator]
                    return
            except (OSError, subprocess.SubprocessError, StopIteration):
                pass
            if time.monotonic() > deadline:
                raise RedisServerError(f"no {what} in time")
            time.sleep(0.1)

    def stop(self) -> None:
        for node in [*self.sentinels, *self.servers]:
            node.stop()

    def __enter__(self) -> RedisSentinel:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (f"RedisSentinel(service={self.service!r}, master={self.master.port}, "
                f"sentinels={len(self.sentinels)})")
