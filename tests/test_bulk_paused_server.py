"""bulk calls on both fronts and both cores against a server SIGSTOPped, killed or
restarted mid-call: every call returns or raises within its deadline, lost acquires are maybe
held and cleaned up, never reported "not acquired"."""

from __future__ import annotations

import time

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from turbolock import AcquireOutcomeUnknownError, TimeoutError
from turbolock.redis_server import RedisServer

T = 0.3
SLACK = 0.5


def _fronts(server: RedisServer, front: str, core: str, prefix: str) -> Fronts:
    return Fronts.at(front, server.url, core=core, key_prefix=prefix, timeout=T,
                  connect_timeout=T)


def _keys(raw: redis.Redis, prefix: str) -> int:
    return sum(1 for _ in raw.scan_iter(match=prefix + "*", count=1000))


@pytest.mark.parametrize("front", FRONTS)
def test_fenced_bulk_acquire_on_a_paused_server_is_maybe_held_and_cleaned(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    fronts = _fronts(own_server, front, core_name, key_prefix)
    raw = redis.Redis(port=own_server.port)
    try:
        client = fronts.make(chunk_size=1000)
        client.query("warm")
        names = [f"f{i}" for i in range(3000)]
        own_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(AcquireOutcomeUnknownError) as caught:
                client.acquire_many(names, 30, fenced=True)
            took = time.monotonic() - started
        finally:
            own_server.resume()
        error = caught.value
        assert took < 3 * T + SLACK, f"fenced acquire_many took {took:.2f}s"
        assert error.acquired == []
        assert set(error.names) | set(error.not_sent) == set(names)
        assert not set(error.names) & set(error.not_sent)
        assert eventually(lambda: client.pending_cleanup == 0, 5.0)
        assert _keys(raw, key_prefix) == 0, "a maybe-held fenced lock was left behind"
    finally:
        fronts.close()
        raw.close()


@pytest.mark.parametrize("fenced", [False, True])
@pytest.mark.parametrize("front", FRONTS)
def test_a_claim_on_a_paused_server_gives_everything_back(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str, fenced: bool) -> None:
    fronts = _fronts(own_server, front, core_name, key_prefix)
    raw = redis.Redis(port=own_server.port)
    try:
        client = fronts.make(chunk_size=50)
        names = [f"c{i}" for i in range(1000)]
        # Half the names are held elsewhere, so the claim needs several chunks.
        other = fronts.make()
        other.acquire_many(names[::2], 30)
        first = client.acquire_many(names, 30, limit=5, fenced=fenced)
        assert len(first.acquired) == 5
        assert client.release_many(first.acquired) == [True] * 5
        own_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(AcquireOutcomeUnknownError) as caught:
                client.acquire_many(names, 30, limit=100, fenced=fenced)
            took = time.monotonic() - started
        finally:
            own_server.resume()
        assert took < 2 * T + SLACK
        error = caught.value
        assert not getattr(error, "acquired", [])
        assert error.names and not set(error.names) & set(error.not_sent)
        assert eventually(lambda: client.pending_cleanup == 0, 5.0)
        assert _keys(raw, key_prefix) == 500, "the claim left locks behind"
    finally:
        fronts.close()
        raw.close()


@pytest.mark.parametrize("chunk_size", [1000, 50], ids=["one-chunk", "chunks"])
@pytest.mark.parametrize("front", FRONTS)
def test_query_many_on_a_paused_server_raises_a_timeout(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str, chunk_size: int) -> None:
    """A read has nothing to clean up: no reply in time is a ``TimeoutError`` (the error a single
    ``query`` raises), not the broken connection's ``ConnectionError``."""
    fronts = _fronts(own_server, front, core_name, key_prefix)
    try:
        client = fronts.make(chunk_size=chunk_size)
        names = [f"q{i}" for i in range(300)]
        assert client.query_many(names)[0].held is False  # connected, nothing held
        own_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(TimeoutError) as caught:
                client.query_many(names)
            took = time.monotonic() - started
            with pytest.raises(TimeoutError):
                client.query(names[0])
        finally:
            own_server.resume()
        assert took < 2 * T + SLACK, f"query_many took {took:.2f}s"
        assert f":{own_server.port}" in str(caught.value), caught.value
        assert [info.held for info in client.query_many(names)] == [False] * len(names)
    finally:
        fronts.close()
