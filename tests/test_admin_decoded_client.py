"""The operator's tools given a redis-py client made with ``decode_responses=True`` (the client an
application often has at hand): they list, show and release by force as with a bytes client; they
failed on the first key found (``str`` has no ``decode``) and on every token (random bytes, not UTF-8)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from turbolock import LockClient, admin
from turbolock.redis_server import RedisServer


@pytest.fixture
def decoded(redis_server: RedisServer) -> Iterator[redis.Redis]:
    server = redis.Redis(host=redis_server.host, port=redis_server.port, decode_responses=True)
    yield server
    server.close()


def test_list_show_and_release_by_force_through_a_decoding_client(
        client: LockClient, decoded: redis.Redis, key_prefix: str) -> None:
    held = client.try_acquire("stock:7", 10)
    other = client.try_acquire("stock:8", 10)
    assert held is not None and other is not None
    assert sorted(lock.name for lock in admin.held_locks(decoded, key_prefix)) == ["stock:7", "stock:8"]
    shown = admin.inspect(decoded, "stock:7", key_prefix)
    assert shown is not None and shown.name == "stock:7" and 9 < shown.remaining <= 10
    assert shown.holder == held.token  # bytes, as from any client: what force_release compares
    assert admin.force_release(decoded, "stock:7", key_prefix, shown.holder)
    assert not client.query("stock:7").held  # gone
    assert client.query("stock:8").held  # the other stays
    assert not client.release(held)  # its holder finds it gone
