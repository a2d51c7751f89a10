"""The main job: `turbolock demo` sells exactly the stock, with or without a server of its own."""

from __future__ import annotations

import os
import subprocess
import sys

import redis

from turbolock.redis_server import RedisServer


def _demo(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    environment.update(env)
    sizes = ["--workers", "3", "--items", "3", "--stock", "20"]
    command = [sys.executable, "-m", "turbolock", "demo", *sizes, *args]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120)


def test_demo_starts_and_stops_its_own_server() -> None:
    done = _demo()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "started a throwaway redis-server" in done.stdout
    assert "stopped the throwaway redis-server" in done.stdout
    lines = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    assert lines["sold"].strip() == "60"
    assert lines["oversold"].strip() == "0"


def test_demo_uses_the_given_server_and_leaves_nothing_there(own_server: RedisServer) -> None:
    data = redis.Redis(port=own_server.port)
    data.set("demo:stock:0", "a key of the server's own")  # the demo's old key names
    done = _demo(REDIS_URL=own_server.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "throwaway" not in done.stdout
    sold = data.info("commandstats")["cmdstat_incrby"]["calls"]  # one INCRBY of an item's sold count per sale
    assert sold == 60, sold
    assert [key.decode() for key in data.scan_iter()] == ["demo:stock:0"]
    assert data.get("demo:stock:0") == b"a key of the server's own"
    data.close()
