"""Which core the package picked, and that the picked one really works against a server."""

from __future__ import annotations

import os

import turbolock
from turbolock import LockClient
from turbolock._wire import core as _core
from turbolock.redis_server import RedisServer


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def test_implementation_matches_the_environment() -> None:
    if _flag("TURBOLOCK_NO_EXTENSIONS"):
        assert turbolock.implementation == "py"
        assert _core.core_c is None
    elif _flag("TURBOLOCK_REQUIRE_EXTENSIONS"):
        assert turbolock.implementation == "c"
        assert _core.default_core.IMPLEMENTATION == "c"
    else:
        assert turbolock.implementation in ("c", "py")


def test_default_core_takes_and_releases_a_lock(redis_server: RedisServer) -> None:
    with LockClient.from_url(redis_server.url, key_prefix="impl:") as client:
        assert client.implementation == turbolock.implementation
        lease = client.try_acquire("one", 5)
        assert lease is not None
        assert client.try_acquire("one", 5) is None
        assert client.release(lease) is True
        assert client.query("one").held is False
