"""``from_redis`` with a redis-py ``credential_provider`` (how rotating credentials are given to
redis-py: cloud IAM tokens that expire every few minutes) asks it for every new connection, as
redis-py does: after a rotation and a reconnect, calls go on. It was asked once, when the client
was made, and every call after the rotation failed with AuthenticationError, for good. A
provider that fails is an AuthenticationError that quotes nothing of it. Found in review."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import redis
from redis.credentials import CredentialProvider

from turbolock import AuthenticationError, LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

MINIMUM = "+set +pttl +evalsha +script|load +get +del +pexpire +ping"


class Rotating(CredentialProvider):
    """Like a token provider: whatever is current when a connection asks."""

    def __init__(self) -> None:
        self.password = "token-one"

    def get_credentials(self) -> tuple[str, str]:
        return ("svc", self.password)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer(extra_config=[f"user svc on >token-one ~turbolock:* -@all {MINIMUM}"]) as made:
        yield made


def _rotate(server: RedisServer, provider: Rotating) -> None:
    with redis.Redis(port=server.port) as admin:  # the default user: the server's administrator
        admin.execute_command("ACL", "SETUSER", "svc", "resetpass", ">token-two")
        provider.password = "token-two"
        admin.execute_command("CLIENT", "KILL", "USER", "svc")


def test_a_rotated_provider_credential_is_used_by_new_connections(server: RedisServer,
                                                                  core_name: str) -> None:
    provider = Rotating()
    prefix = f"turbolock:{uuid.uuid4().hex[:10]}:"
    with redis.Redis(port=server.port, credential_provider=provider) as source, \
            LockClient.from_redis(source, core=core_name, key_prefix=prefix) as client:
        assert client.query("x").held is False
        _rotate(server, provider)
        assert source.set(prefix + "redis-py", 1)  # redis-py reconnects with the current token
        assert client.query("x").held is False  # AuthenticationError: the first token, frozen


def test_async_a_rotated_provider_credential_is_used_by_new_connections(server: RedisServer,
                                                                        core_name: str) -> None:
    provider = Rotating()
    prefix = f"turbolock:{uuid.uuid4().hex[:10]}:"

    async def main() -> None:
        with redis.Redis(port=server.port, credential_provider=provider) as source:
            async with AsyncLockClient.from_redis(source, core=core_name, key_prefix=prefix) as client:
                assert (await client.query("x")).held is False
                _rotate(server, provider)
                assert source.set(prefix + "redis-py", 1)
                assert (await client.query("x")).held is False

    asyncio.run(main())


class Failing(CredentialProvider):
    def get_credentials(self) -> tuple[str, str]:
        raise RuntimeError("vault said: token-three is not yours")


def test_a_failing_provider_is_an_authentication_error_quoting_nothing(server: RedisServer,
                                                                      core_name: str) -> None:
    with redis.Redis(port=server.port, credential_provider=Failing()) as source, \
            LockClient.from_redis(source, core=core_name) as client:
        assert "credential_provider" not in repr(client)
        with pytest.raises(AuthenticationError) as raised:
            client.query("x")
        assert "RuntimeError" in str(raised.value) and "token-three" not in str(raised.value)
        assert raised.value.__context__ is None and raised.value.__cause__ is None  # nor in its chain
