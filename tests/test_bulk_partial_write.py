"""A bulk chunk bigger than the socket buffers, written to a server that stopped reading
(SIGSTOP), cut off part-way by the call's timeout (found in review): the commands that reached
the server run when it resumes, so the chunk counts as sent without a reply, its locks maybe held
and released in the background, never "not sent" (82 locks stayed held for their whole ttl, with
nothing owed); and the call fails after one timeout (each send() that made some progress was
given the whole timeout again: three of them)."""

from __future__ import annotations

import time

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from turbolock import AcquireOutcomeUnknownError, LockError
from turbolock.redis_server import RedisServer

TIMEOUT = 0.5
NAMES = [f"n{i}-" + "x" * 400 for i in range(10_000)]  # one chunk of about 4.3 MB


def _keys(raw: redis.Redis, prefix: str) -> int:
    return sum(1 for _ in raw.scan_iter(match=prefix + "*", count=1000))


@pytest.mark.parametrize("front", FRONTS)
def test_a_chunk_cut_off_mid_write_is_maybe_held_and_released(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    fronts = Fronts.at(front, own_server.url, core=core_name, key_prefix=key_prefix, timeout=TIMEOUT,
                       connect_timeout=TIMEOUT)
    raw = redis.Redis(port=own_server.port)
    try:
        client = fronts.make(chunk_size=10_000)
        assert client.query("warm").held is False
        own_server.pause()
        try:
            with pytest.raises(AcquireOutcomeUnknownError) as caught:
                client.acquire_many(NAMES, 60)
        finally:
            own_server.resume()
        assert caught.value.names, "the chunk written part-way was reported not sent"
        assert eventually(lambda: _keys(raw, key_prefix) == 0, 10), \
            "locks the cut-off chunk took stayed held: nothing released them"
    finally:
        fronts.close()
        raw.close()


@pytest.mark.parametrize("front", FRONTS)
def test_a_chunk_to_a_stopped_server_fails_after_one_timeout(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    fronts = Fronts.at(front, own_server.url, core=core_name, key_prefix=key_prefix, timeout=TIMEOUT,
                       connect_timeout=TIMEOUT)
    try:
        client = fronts.make(chunk_size=10_000)
        assert client.query("warm").held is False
        own_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(LockError):
                client.acquire_many(NAMES, 60, limit=10_000)
            took = time.monotonic() - started
        finally:
            own_server.resume()
        assert took < TIMEOUT + 0.3, f"one chunk on a stopped server took {took:.2f} s"
    finally:
        fronts.close()
