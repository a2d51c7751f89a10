"""A release that could not be sent (ConnectionError: no server) is not owed in the background:
the caller still holds the lease. Were it owed, a holder that takes the lock again with the same
token (a caller-given token, as README documents for holders that recognise their locks) once
the server is back would have its new lock deleted by that background release (a reviewer's
test of a fix tried this session, which owed every failed release)."""

from __future__ import annotations

import os
import time

import pytest
import redis

from turbolock import ConnectionError, LockClient, LockError, OutcomeUnknownError
from turbolock.redis_server import RedisServer

T = 0.3


def test_an_unsent_release_leaves_a_later_acquire_with_the_same_token_alone(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    token = os.urandom(16)
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T,
                             connect_timeout=T) as client:
        lease = client.try_acquire("job", 20, token=token)
        assert lease is not None
        key = client.key_prefix + b"job"
        own_server.kill()
        with pytest.raises(LockError):
            client.query("job")  # the pooled connection goes
        with pytest.raises(ConnectionError) as info:
            client.release(lease)  # refused: never sent
        assert not isinstance(info.value, OutcomeUnknownError)
        assert client.pending_cleanup == 0, "a release that never went out is owed in the background"
        own_server.start()
        again = client.try_acquire("job", 20, token=token)
        assert again is not None, "could not take the lock again"
        raw = redis.Redis(host=own_server.host, port=own_server.port)
        try:
            time.sleep(1.5)
            assert raw.get(key) == token, (
                "the lock taken again with the same token was deleted by a background release owed "
                f"by the failed release (pending_cleanup={client.pending_cleanup})")
        finally:
            raw.close()
