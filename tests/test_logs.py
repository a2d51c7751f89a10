"""What turbolock logs never contains a token or a password."""

from __future__ import annotations

import logging

import pytest
import redis

from turbolock import LockClient, LockError
from turbolock.redis_server import RedisServer

TOKEN = b"SECRET-TOKEN-4f2a9c1e77"


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(record.getMessage() + (record.exc_text or "") for record in caplog.records)


@pytest.mark.timing  # a 0.15 s timeout on a live server's first commands
def test_logs_name_locks_but_never_tokens(own_server: RedisServer, core_name: str,
                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="turbolock")
    raw = redis.Redis(port=own_server.port)
    with LockClient.from_url(own_server.url, core=core_name, timeout=0.15) as client:
        lease = client.try_acquire("logged", 0.6, token=TOKEN, auto_renew=True,
                                   on_lost=lambda lease: 1 / 0)  # a failing callback is logged too
        assert lease is not None
        raw.set(client.key_prefix + b"logged", b"thief", px=5000)
        assert lease.lost.wait(2)
        maybe = client.try_acquire("maybe", 30, token=TOKEN + b"-2")
        assert maybe is not None
        own_server.pause()
        try:
            with pytest.raises(LockError):
                client.release(maybe)  # the retry of this release fails and is logged
            with pytest.raises(LockError):
                client.query("x")
        finally:
            own_server.resume()
    raw.close()
    text = _logged(caplog)
    assert "logged" in text  # something was logged, naming the lock
    assert "SECRET" not in text and TOKEN.hex() not in text


def test_refused_password_is_not_logged(own_server: RedisServer, core_name: str,
                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    redis.Redis(port=own_server.port).config_set("requirepass", "right-password")
    url = f"redis://:wrong-password-77@{own_server.host}:{own_server.port}/0"
    with LockClient.from_url(url, core=core_name) as client, pytest.raises(LockError) as caught:
        client.query("x")
    assert "wrong-password-77" not in str(caught.value) and "wrong-password-77" not in _logged(caplog)
