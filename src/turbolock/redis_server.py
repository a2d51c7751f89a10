"""A throwaway ``redis-server`` on a free loopback port, for the demo, the tests and the benchmarks.

It is a real server (Debian's ``redis-server``, or Valkey's: ``turbolock.server_binaries``), never
a fake: started with no persistence
unless asked, in its own temporary directory, and stopped (with the directory removed) by
``stop()`` or at the end of a ``with`` block.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from types import TracebackType

from turbolock.errors import LockError
from turbolock.free_ports import claim_free_port
from turbolock.server_binaries import binaries


class RedisServerError(LockError):
    """The throwaway redis-server could not be started."""


def redis_cli(node: RedisServer, *args: str, timeout: float = 10.0) -> str:
    """``redis-cli`` against one server; its output."""
    done = subprocess.run([binaries().cli, "-h", node.host, "-p", str(node.port), *node.cli_arguments, *args],
                          capture_output=True, text=True, timeout=timeout)
    return done.stdout


SERVER_PORTS = (10000, 19999)
"""Ports of plain servers and Sentinels (cluster nodes use 20000-22767, their buses 30000-32767)."""


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now and no running process of this machine
    was handed by this function before (see ``turbolock.free_ports``)."""
    return claim_free_port(*SERVER_PORTS)


class RedisServer:
    """One ``redis-server`` process (``executable`` by default: what ``binaries()`` picks).

    ``extra_config`` lines are appended to the generated config (for TLS, ACL users,
    persistence...); ``arguments`` follow the config file on the command line (``--sentinel``
    runs a Sentinel). ``restart()`` stops and starts the same server on the same port, so
    clients see a real restart; ``pause()``/``resume()`` send SIGSTOP/SIGCONT.
    """

    def __init__(self, *, port: int | None = None, extra_config: Sequence[str] = (),
                 executable: str | None = None, startup_timeout: float = 10.0,
                 arguments: Sequence[str] = ()) -> None:
        self.port = port if port is not None else free_port()
        self.host = "127.0.0.1"
        self.extra_config = list(extra_config)
        self.executable = executable if executable is not None else binaries().server
        self.arguments = list(arguments)
        self.cli_arguments: list[str] = []
        """What ``redis-cli`` needs besides the address to talk to it (``--tls --cacert ...``)."""
        self.startup_timeout = startup_timeout
        self.directory = tempfile.mkdtemp(prefix="turbolock-redis-")
        self.process: subprocess.Popen[bytes] | None = None
        self._started_once = False

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def unix_socket(self) -> str:
        return os.path.join(self.directory, "redis.sock")

    def _config(self) -> str:
        lines = [
            f"port {self.port}",
            f"bind {self.host}",
            f"dir {self.directory}",
            f"unixsocket {self.unix_socket}",
            "unixsocketperm 700",
            'save ""',
            "appendonly no",
            "daemonize no",
            "protected-mode no",
            "loglevel warning",
            f"logfile {os.path.join(self.directory, 'redis.log')}",
            *self.extra_config,
        ]
        return "\n".join(lines) + "\n"

    def start(self) -> RedisServer:
        if shutil.which(self.executable) is None:
            raise RedisServerError(f"{self.executable} is not installed (apt-get install redis-server)")
        config_path = os.path.join(self.directory, "redis.conf")
        if "--sentinel" not in self.arguments or not os.path.exists(config_path):
            # (a Sentinel rewrites its config with what it learnt: kept across restarts)
            with open(config_path, "w") as config:
                config.write(self._config())
        command = [self.executable, config_path, *self.arguments]
        first = not self._started_once
        self._started_once = True
        try:
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            start_new_session=True)
            self._wait_ready()
        except BaseException:  # an error or Ctrl-C: no server left running in its own session
            self.stop(remove_directory=first)  # a restart's directory (a Sentinel's config) is kept
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RedisServerError(f"redis-server exited at start: {self._log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    pass
            except OSError:
                time.sleep(0.01)
                continue
            if listening_pid_matches(self.process.pid, self.port) is not False:
                return
            time.sleep(0.01)  # another process has the port: ours exits ("Address already in use")
        raise RedisServerError(f"redis-server did not listen on port {self.port} in {self.startup_timeout}s")

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self.directory, "redis.log")) as log:
                return log.read()[-2000:]
        except OSError:
            return "(no log)"

    def stop(self, *, remove_directory: bool = True) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None and process.stderr is not None:
            process.stderr.close()
        if remove_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crash would."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            if self.process.stderr is not None:
                self.process.stderr.close()
            self.process = None

    def restart(self, *, down_for: float = 0.0) -> None:
        """Stop, stay down ``down_for`` seconds, start again on the same port with the same config."""
        self.stop(remove_directory=False)
        if down_for > 0:
            time.sleep(down_for)
        self.start()

    def pause(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RedisServer(port={self.port}, running={self.running})"


def listening_pid_matches(pid: int, port: int) -> bool | None:
    """Whether the socket listening on loopback ``port`` belongs to process ``pid`` (Linux's
    /proc); None where that cannot be told. A server that lost the port to another process
    would otherwise pass for started: the other one answers the connection."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows)
                for row in rows:
                    fields = row.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                        inodes.add(fields[9])
        except (OSError, IndexError, ValueError):
            return None
    if not inodes:
        return None
    try:
        links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return None
    return any(f"socket:[{inode}]" in links for inode in inodes)
