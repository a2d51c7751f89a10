"""A Lock object's release() on a server that stopped answering (SIGSTOP), after an earlier
call timed out there (so the release needs a new connection, whose handshake gets no answer):
the release raises a ConnectionError and, since it never went out, the Lock keeps its lease
and releases the lock when asked again once the server answers. (The Lock once let go of the
lease first: the lock stayed held to its ttl and could not be released again.) A release that
went out without a reply raises OutcomeUnknownError and is retried in the background."""

from __future__ import annotations

from functools import partial

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from turbolock import ConnectionError, LockClient, LockError, OutcomeUnknownError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

T = 0.3


@pytest.mark.parametrize("front", FRONTS)
def test_a_lock_release_that_never_went_out_can_be_made_again(own_server: RedisServer, core_name: str,
                                                              key_prefix: str, front: str) -> None:
    fronts = Fronts(front, partial(LockClient.from_url, own_server.url),
                    partial(AsyncLockClient.from_url, own_server.url), core=core_name,
                    key_prefix=key_prefix, timeout=T, connect_timeout=T)
    raw = redis.Redis(host=own_server.host, port=own_server.port)
    try:
        client = fronts.make()
        lock = client.lock("job", 10)
        assert lock.acquire()
        key = key_prefix + "job"
        own_server.pause()
        try:
            with pytest.raises(LockError):
                lock.locked()  # times out: its connection goes
            try:
                lock.release()
                out: object = "released"
            except LockError as exc:
                out = exc
        finally:
            own_server.resume()
        assert isinstance(out, ConnectionError), f"release() on a stopped server: {out!r}"
        if isinstance(out, OutcomeUnknownError):  # it went out: retried in the background
            assert eventually(lambda: raw.exists(key) == 0, 4.0), "the unconfirmed release was not retried"
        else:  # it never went out: the Lock still holds the lock, and releases it now
            assert raw.exists(key) == 1
            lock.release()
            assert raw.exists(key) == 0
    finally:
        raw.close()
        fronts.close()
