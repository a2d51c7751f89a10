"""A Lock object's release() on a server that stopped answering (SIGSTOP), after an earlier
call timed out there (so the release needs a new connection, whose handshake gets no answer):
the release raises, the Lock lets go of its lease, and the lock is released in the background
once the server answers again. (A release that never went out was once owed to nobody: the
lock stayed held to its ttl, and the Lock could not release it again.)"""

from __future__ import annotations

from functools import partial

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from turbolock import LockClient, LockError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

T = 0.3


@pytest.mark.parametrize("front", FRONTS)
def test_lock_release_on_a_stopped_server_is_not_dropped(own_server: RedisServer, core_name: str,
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
        cleaned = eventually(lambda: raw.exists(key) == 0, 4.0)
        try:
            lock.release()
            again = "released on a second try"
        except LockError as exc:
            again = repr(exc)
        assert cleaned, (f"release() raised {out!r}; 4s after resume the lock is still held "
                         f"(pttl {raw.pttl(key)}ms) and a second release() says: {again}")
    finally:
        raw.close()
        fronts.close()
