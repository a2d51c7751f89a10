"""extend and extend_many by ``SET ... IFEQ`` where the server offers it (Valkey 8.1, detected by the
handshake's HELLO), by the scripts where it does not (Redis 7.0): the same results and errors on
both, on both cores and both front ends. Which commands ran is read from INFO commandstats.

Both servers are started here whatever ``TURBOLOCK_TEST_SERVER`` says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _raw import raw_connection
from turbolock import LockClient, ResponseError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer
from turbolock.server_binaries import named

SERVERS = ["valkey", "redis"]


@pytest.fixture(scope="module", params=SERVERS)
def server(request: pytest.FixtureRequest) -> Iterator[RedisServer]:
    with RedisServer(executable=named(request.param).server) as started:
        yield started


@pytest.fixture
def raw(server: RedisServer) -> Iterator[redis.Redis]:
    yield from raw_connection(server)


@pytest.fixture(params=FRONTS)
def make_client(request: pytest.FixtureRequest, server: RedisServer, core_name: str,
                key_prefix: str) -> Iterator[Callable[..., Any]]:
    fronts = Fronts(request.param, partial(LockClient.from_url, server.url),
                    partial(AsyncLockClient.from_url, server.url), core=core_name, key_prefix=key_prefix)
    yield fronts.make
    fronts.close()


def _is_valkey(raw: redis.Redis) -> bool:
    return raw.info("server").get("server_name") == "valkey"


def _calls(raw: redis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = raw.info("commandstats")
    return {name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("set", "evalsha")}


def test_extends_go_as_set_ifeq_only_where_the_server_offers_it(make_client: Callable[..., Any],
                                                                raw: redis.Redis) -> None:
    client = make_client()
    lease = client.try_acquire("one", 10)
    many = [lease for lease in client.acquire_many(["a", "b", "c"], 10) if lease is not None]
    assert lease is not None and len(many) == 3
    raw.config_resetstat()
    assert client.extend(lease, 40) is True
    assert client.extend_many(many, 50) == [True, True, True]
    key = client.key_prefix + b"one"
    assert 39_000 < raw.pttl(key) <= 40_000 and raw.get(key) == lease.token
    assert all(49_000 < raw.pttl(client.key_prefix + name) <= 50_000 for name in (b"a", b"b", b"c"))
    calls = _calls(raw)
    if _is_valkey(raw):
        assert calls == {"set": 4, "evalsha": 0}, calls
    else:
        # EXTEND, then one RENEW_MANY for the three (each once more after a first NOSCRIPT)
        assert calls["set"] == 0 and calls["evalsha"] in (2, 3, 4), calls


def test_only_the_holder_extends_and_a_lost_lease_says_so(make_client: Callable[..., Any],
                                                          raw: redis.Redis) -> None:
    client = make_client()
    stolen, kept = client.try_acquire("stolen", 10), client.try_acquire("kept", 10)
    assert stolen is not None and kept is not None
    raw.set(client.key_prefix + b"stolen", b"someone-else", px=5000)
    assert client.extend(stolen, 40) is False
    assert stolen.is_lost
    assert raw.get(client.key_prefix + b"stolen") == b"someone-else"
    assert raw.pttl(client.key_prefix + b"stolen") <= 5000  # the thief's ttl, untouched
    again = client.try_acquire("again", 10)
    assert again is not None
    raw.delete(client.key_prefix + b"again")
    assert client.extend_many([again, kept], 40) == [False, True]
    assert not raw.exists(client.key_prefix + b"again"), "an extend of a gone key must not set it"
    assert raw.pttl(client.key_prefix + b"kept") > 39_000


def test_a_key_of_another_type_is_the_same_error(make_client: Callable[..., Any], raw: redis.Redis) -> None:
    client = make_client()
    lease = client.try_acquire("typed", 10)
    assert lease is not None
    raw.delete(client.key_prefix + b"typed")
    raw.hset(client.key_prefix + b"typed", "field", "value")
    with pytest.raises(ResponseError) as raised:
        client.extend(lease, 40)
    assert raised.value.code == "WRONGTYPE"
    assert raw.type(client.key_prefix + b"typed") == b"hash"
