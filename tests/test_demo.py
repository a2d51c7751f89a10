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


def test_demo_uses_the_given_server(own_server: RedisServer) -> None:
    done = _demo(REDIS_URL=own_server.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "throwaway" not in done.stdout
    data = redis.Redis(port=own_server.port)
    assert [int(data.get(f"demo:sold:{item}") or 0) for item in range(3)] == [20, 20, 20]
    assert [int(data.get(f"demo:stock:{item}") or 0) for item in range(3)] == [0, 0, 0]
    data.close()
