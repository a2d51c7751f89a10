"""A username reaches the server as that user, or is refused before anything is sent.

``AUTH`` with one argument is the default user's password: a username without a password was
dropped (the client connected as the default user, whose permissions are not the ones asked
for), and a redis-py credential provider answering ``(username, "")`` (a ``nopass`` user; redis-py
sends ``AUTH username ""``) had its username sent as the default user's password. The
Sentinels' ``sentinel_username`` without ``sentinel_password`` was dropped the same way."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from turbolock import InvalidArgumentError, LockClient
from turbolock.asyncio import AsyncLockClient, AsyncSentinelLockClient
from turbolock.redis_server import RedisServer
from turbolock.sentinel import SentinelLockClient

DEFAULT_PASSWORD = "default-user-pw"


@pytest.fixture(scope="module")
def nopass_server() -> Iterator[RedisServer]:
    """The default user needs a password; ``alice`` takes any."""
    users = [f"requirepass {DEFAULT_PASSWORD}", "user alice on nopass ~* +@all"]
    with RedisServer(extra_config=users) as server:
        yield server


class _Provider(redis.CredentialProvider):
    def get_credentials(self) -> tuple[str, str]:
        return "alice", ""


def _users(server: RedisServer) -> list[str]:
    with redis.Redis(port=server.port, password=DEFAULT_PASSWORD) as observer:
        return sorted(entry["user"] for entry in observer.client_list() if entry["cmd"] != "client|list")


def test_a_provider_of_a_nopass_user_connects_as_that_user(nopass_server: RedisServer, core_name: str,
                                                         key_prefix: str) -> None:
    with redis.Redis(port=nopass_server.port, credential_provider=_Provider()) as source:
        assert source.ping()  # redis-py: AUTH alice ""
        source.connection_pool.disconnect()
        with LockClient.from_redis(source, core=core_name, key_prefix=key_prefix) as client:
            lease = client.try_acquire("as-alice", 5)
            assert lease is not None
            assert _users(nopass_server) == ["alice"]
            assert client.release(lease)


@pytest.mark.parametrize("given", ["keywords", "url"])
def test_a_username_without_a_password_is_refused(nopass_server: RedisServer, given: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        if given == "keywords":
            LockClient(port=nopass_server.port, username="alice")
        else:
            LockClient.from_url(f"redis://alice@127.0.0.1:{nopass_server.port}/0")
    assert raised.value.argument == "username"
    with pytest.raises(InvalidArgumentError):
        AsyncLockClient(port=nopass_server.port, username="alice")


@pytest.mark.parametrize("kind", [SentinelLockClient, AsyncSentinelLockClient])
def test_a_sentinel_username_without_a_password_is_refused(kind: type) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        kind(["redis://127.0.0.1:1"], "mymaster", sentinel_username="watcher")
    assert raised.value.argument == "sentinel_username"


def test_an_empty_password_is_sent(nopass_server: RedisServer, core_name: str, key_prefix: str) -> None:
    """A guard, not a regression test (it passed before the refusal above): an empty password is a
    password, so the refusal must not catch it, and AUTH goes as that user."""
    with LockClient(port=nopass_server.port, username="alice", password="", core=core_name,
                    key_prefix=key_prefix) as client:
        assert client.query("as-alice").held is False
        assert _users(nopass_server) == ["alice"]
