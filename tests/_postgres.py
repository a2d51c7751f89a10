"""A throwaway PostgreSQL cluster for the tests that need a real database: ``initdb`` into a
temporary directory, ``pg_ctl`` on a free loopback port, trust authentication, no fsync;
stopped by its pid when the test module ends. Debian's ``postgresql`` package provides the
binaries (``scripts/bootstrap.sh`` installs it); as root, the server runs as ``postgres``."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time

from turbolock.redis_server import free_port


def binaries() -> str | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda path: int(path.split("/")[4]) if path.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


class Postgres:
    def __init__(self, bin_dir: str) -> None:
        self.bin_dir = bin_dir
        self.port = free_port()
        self.directory = tempfile.mkdtemp(prefix="turbolock-pg-")
        self.data = os.path.join(self.directory, "data")
        self._as_user: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self.directory, "postgres", "postgres")
            self._as_user = ["runuser", "-u", "postgres", "--"]

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres connect_timeout=10"

    def _run(self, *command: str) -> None:
        result = subprocess.run([*self._as_user, *command], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {result.stderr.strip() or result.stdout.strip()}")

    def start(self) -> Postgres:
        self._run(os.path.join(self.bin_dir, "initdb"), "-D", self.data, "-A", "trust", "-U", "postgres",
                  "--no-sync")
        options = (f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off")
        self._run(os.path.join(self.bin_dir, "pg_ctl"), "-D", self.data, "-o", options, "-w", "-t", "60",
                  "-l", os.path.join(self.directory, "log"), "start")
        return self

    def stop(self) -> None:
        pid_file = os.path.join(self.data, "postmaster.pid")
        try:
            with open(pid_file) as file:
                pid = int(file.readline())
        except (OSError, ValueError):
            pid = 0
        if pid:
            try:
                os.kill(pid, signal.SIGINT)  # fast shutdown
            except ProcessLookupError:
                pid = 0
        deadline = time.monotonic() + 30
        while pid and time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            if pid:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.directory, ignore_errors=True)
