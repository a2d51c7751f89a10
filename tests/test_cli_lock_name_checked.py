"""``turbolock locks inspect|release URL NAME`` refuses a name every client refuses (empty, over
1024 bytes) as bad input (exit 2), naming it, before connecting. An empty name was looked up as
the bare prefix: ``release --force --yes`` deleted the key named exactly like the prefix (a
script's unset ``"$NAME"``), a key that is no lock at all. Found in review."""

from __future__ import annotations

import pytest
import redis

from _cli import run_cli
from turbolock.redis_server import RedisServer

PREFIX = "cli-name-checked:"


@pytest.mark.parametrize("name", ["", "n" * 1025], ids=["empty", "too-long"])
def test_a_name_no_client_takes_is_bad_input_and_touches_nothing(redis_server: RedisServer,
                                                                 name: str) -> None:
    raw = redis.Redis(host=redis_server.host, port=redis_server.port)
    key = PREFIX + name
    try:
        raw.set(key, b"not a lock", px=60_000)  # a string key with a ttl, named like the lock's key
        inspected = run_cli("locks", "inspect", redis_server.url, name, "--prefix", PREFIX)
        released = run_cli("locks", "release", redis_server.url, name, "--prefix", PREFIX, "--force", "--yes")
        assert raw.exists(key) == 1, "release --force deleted the key"
        assert (inspected.returncode, released.returncode) == (2, 2), (inspected.stdout, released.stdout)
        assert "name:" in inspected.stderr and "name:" in released.stderr
    finally:
        raw.delete(key)
        raw.close()


def test_the_control_a_good_name_is_released(redis_server: RedisServer) -> None:
    raw = redis.Redis(host=redis_server.host, port=redis_server.port)
    try:
        raw.set(PREFIX + "job", b"token", px=60_000)
        released = run_cli("locks", "release", redis_server.url, "job", "--prefix", PREFIX, "--force",
                           "--yes")
        assert released.returncode == 0, released.stderr
        assert raw.exists(PREFIX + "job") == 0
    finally:
        raw.close()
