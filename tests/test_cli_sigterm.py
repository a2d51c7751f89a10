"""``turbolock demo`` / ``turbolock bench`` stopped by SIGTERM (``timeout 60 turbolock demo``, a
CI job cancelled, ``kill PID``) clean up as on Ctrl-C: the throwaway redis-server (in a session of
its own, so nothing else stops it) is stopped, with its directory, and a demo against the user's
--url server leaves no keys there. They ended where they stood. Found in review.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import redis

from turbolock.redis_server import RedisServer


def _cli(*argv: str) -> subprocess.Popen[str]:
    environment = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.Popen([sys.executable, "-m", "turbolock", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                            env=environment, start_new_session=True)


def _throwaway_port(process: subprocess.Popen[str]) -> int:
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        found = re.search(r"started a throwaway redis-server on port (\d+)", line)
        if found:
            return int(found.group(1))
    raise AssertionError("no throwaway server announced")


def _serving(port: int) -> int | None:
    """The pid of the redis-server on ``port``, if one answers."""
    try:
        return int(redis.Redis(port=port, socket_timeout=1).info("server")["process_id"])
    except redis.RedisError:
        return None


def _directory(port: int) -> str | None:
    try:
        return str(redis.Redis(port=port, socket_timeout=1).config_get("dir")["dir"])
    except redis.RedisError:
        return None


def _terminated_leaves_no_server(*argv: str) -> None:
    process = _cli(*argv)
    port = _throwaway_port(process)
    directory = _directory(port)
    leaked = None
    try:
        time.sleep(1.0)  # well into the run
        process.send_signal(signal.SIGTERM)  # the parent only, as `kill PID` or a supervisor does
        process.wait(30)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _serving(port) is not None:
            time.sleep(0.1)
        leaked = _serving(port)
        assert leaked is None, f"{argv[0]}: redis-server pid {leaked} still serves port {port} after SIGTERM"
    finally:
        with_suppressed(lambda: os.killpg(process.pid, signal.SIGKILL))  # the buyers, if any are left
        if leaked is not None:
            with_suppressed(lambda: os.kill(leaked, signal.SIGKILL))
        if directory and os.path.basename(directory).startswith("turbolock-redis-"):
            shutil.rmtree(directory, ignore_errors=True)  # left behind with the server


def with_suppressed(action: object) -> None:
    try:
        action()  # type: ignore[operator]
    except OSError:
        pass


def test_demo_sigterm_stops_its_throwaway_server() -> None:
    _terminated_leaves_no_server("demo", "--workers", "2", "--items", "2", "--stock", "1000000")


def test_bench_sigterm_stops_its_throwaway_server() -> None:
    _terminated_leaves_no_server("bench", "--only", "pairs", "--repeats", "50")


def test_demo_sigterm_leaves_no_keys_on_the_users_server(own_server: RedisServer) -> None:
    data = redis.Redis(port=own_server.port)
    process = _cli("demo", "--url", own_server.url, "--workers", "2", "--items", "2", "--stock", "1000000")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not data.info("commandstats").get("cmdstat_incrby"):
            time.sleep(0.1)  # the sale has begun
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        time.sleep(1.0)
    finally:
        with_suppressed(lambda: os.killpg(process.pid, signal.SIGKILL))
    left = {key.decode(): data.ttl(key) for key in data.scan_iter("demo:*")}
    assert left == {}, f"keys the demo left on the user's server (ttl -1 = never expire): {left}"
