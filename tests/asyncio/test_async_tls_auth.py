"""TLS through the loop's ssl support, and the AUTH/SELECT handshake, against real servers."""

from __future__ import annotations

import traceback
from collections.abc import Iterator

import pytest
import redis
from async_helpers import Runner

from _pki import Pki
from turbolock import AuthenticationError, ConnectionError, LockError, ResponseError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer, free_port

PASSWORD = "Sup3r-Secret-Pa55word"


@pytest.fixture(scope="module")
def tls_server(pki: Pki) -> Iterator[RedisServer]:
    port = free_port()
    with RedisServer(port=port, extra_config=[
            "port 0", f"tls-port {port}", f"tls-cert-file {pki.server_cert}",
            f"tls-key-file {pki.server_key}", f"tls-ca-cert-file {pki.ca}", "tls-auth-clients no"]) as server:
        yield server


@pytest.fixture(scope="module")
def auth_server() -> Iterator[RedisServer]:
    with RedisServer(extra_config=[f"requirepass {PASSWORD}",
                                   f"user locker on >{PASSWORD} ~turbolock:* -@all +set +pttl +evalsha "
                                   "+script|load +get +del +pexpire"]) as server:
        yield server


def test_tls_lifecycle(arun: Runner, tls_server: RedisServer, pki: Pki, core_name: str,
                       key_prefix: str) -> None:
    async def body() -> None:
        for host in ("127.0.0.1", "localhost"):
            url = f"rediss://{host}:{tls_server.port}/0"
            async with AsyncLockClient.from_url(url, core=core_name, key_prefix=key_prefix,
                                                ssl_ca_certs=str(pki.ca)) as client:
                lease = await client.try_acquire("tls-lock", 30)
                assert lease is not None
                assert await client.try_acquire("tls-lock", 30) is None
                assert await client.extend(lease, 40) and await client.release(lease)
                result = await client.acquire_many([f"m{i}" for i in range(3000)], 10)
                assert result.all_acquired
                assert all(await client.release_many(result.acquired))

    arun(body)


def test_tls_refuses_an_unknown_ca_and_plain_clients(arun_asyncio: Runner, tls_server: RedisServer,
                                                     core_name: str) -> None:
    async def body() -> None:
        url = f"rediss://127.0.0.1:{tls_server.port}/0"
        async with AsyncLockClient.from_url(url, core=core_name) as client:
            with pytest.raises(ConnectionError, match=r"TLS handshake with 127\.0\.0\.1:\d+ failed"):
                await client.query("x")
        async with AsyncLockClient.from_url(url, core=core_name, ssl_cert_reqs="none",
                                            insecure=True) as client:
            assert (await client.query("x")).held is False
        async with AsyncLockClient.from_url(url.replace("rediss", "redis"), core=core_name,
                                            timeout=0.5) as client:
            with pytest.raises(ConnectionError):
                await client.query("x")

    arun_asyncio(body)


def test_auth_and_select(arun: Runner, auth_server: RedisServer, core_name: str) -> None:
    async def body() -> None:
        port = auth_server.port
        async with AsyncLockClient.from_url(f"redis://:{PASSWORD}@127.0.0.1:{port}/2",
                                            core=core_name) as client:
            lease = await client.try_acquire("authed", 10)
            assert lease is not None and await client.release(lease)
        async with AsyncLockClient.from_url(f"redis://locker:{PASSWORD}@127.0.0.1:{port}/0",
                                            core=core_name) as client:
            lease = await client.try_acquire("authed", 10)
            assert lease is not None and await client.release(lease)
        errors: list[LockError] = []
        for url, kind in ((f"redis://:wrong-{PASSWORD}@127.0.0.1:{port}/0", AuthenticationError),
                          (f"redis://127.0.0.1:{port}/0", AuthenticationError),
                          (f"redis://127.0.0.1:{port}/1", AuthenticationError),
                          (f"redis://locker:{PASSWORD}@127.0.0.1:{port}/1", ResponseError)):
            async with AsyncLockClient.from_url(url, core=core_name) as client:
                with pytest.raises(kind) as raised:
                    await client.try_acquire("x", 10)
                errors.append(raised.value)
                assert repr(client).count(PASSWORD) == 0
        assert "refused the credentials of the default user" in str(errors[0])
        assert "NOAUTH" in str(errors[2]) and "NOPERM" in str(errors[3])
        for error in errors:
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            assert PASSWORD not in text

    arun(body)


def test_from_redis_takes_the_credentials(arun_asyncio: Runner, auth_server: RedisServer,
                                          core_name: str) -> None:
    async def body() -> None:
        source = redis.Redis(port=auth_server.port, username="locker", password=PASSWORD)
        async with AsyncLockClient.from_redis(source, core=core_name) as client:
            lease = await client.try_acquire("from-redis", 10)
            assert lease is not None and await client.release(lease)
        source.close()

    arun_asyncio(body)
