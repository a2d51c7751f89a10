"""Secrets (lock tokens, passwords) never show in an error or a log line, even where the server
quotes them back: an operator who renamed or disabled a command gets ``ERR unknown command 'SET',
with args beginning with: 'key' 'token' ...``, and a Sentinel or cluster node given in a wrong
form (a URL as bytes, a (host, port, password) triple) is refused without quoting it. Found in
review: both went into error messages, and the renewer's warning, as they were."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from turbolock import ClusterLockClient, LockClient, LockError, SentinelLockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

TOKEN = b"TOKSECRET-0123456789abcdef"
PASSWORD = "Rv-Secret-Pa55word"


@pytest.fixture
def renamed_server() -> Iterator[RedisServer]:
    """A server whose operator disabled commands (rename-command): Redis then answers
    ``ERR unknown command 'X', with args beginning with: ...`` -- quoting the arguments sent."""
    with RedisServer(extra_config=['rename-command EVALSHA "evalsha-hidden"',
                                   'rename-command SET "set-hidden"']) as server:
        yield server


def test_error_replies_that_echo_arguments_do_not_leak_tokens(renamed_server: RedisServer,
                                                              core_name: str) -> None:
    with LockClient.from_url(renamed_server.url, core=core_name, key_prefix="rv:") as client:
        with pytest.raises(LockError) as acquire:
            client.try_acquire("a", 10, token=TOKEN)
        with pytest.raises(LockError) as many:
            client.acquire_many(["b", "c"], 10, tokens=[TOKEN + b"b", TOKEN + b"c"])
        lease = client.lease("d", TOKEN + b"d")
        with pytest.raises(LockError) as release:
            client.release(lease)
        with pytest.raises(LockError) as extend:
            client.extend(lease, 5)
    for raised in (acquire, many, release, extend):
        assert b"TOKSECRET" not in str(raised.value).encode(), str(raised.value)


def test_async_error_replies_do_not_leak_tokens(renamed_server: RedisServer, core_name: str) -> None:
    async def main() -> str:
        client = AsyncLockClient.from_url(renamed_server.url, core=core_name, key_prefix="rv:")
        try:
            await client.release(client.lease("d", TOKEN + b"d"))
        except LockError as exc:
            return str(exc)
        finally:
            await client.close()
        return ""

    assert "TOKSECRET" not in asyncio.run(main())


def test_renewal_warnings_do_not_log_tokens(core_name: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="turbolock")
    with RedisServer(extra_config=['rename-command EVALSHA "evalsha-hidden"']) as server:
        with LockClient.from_url(server.url, core=core_name, key_prefix="rv:") as client:
            lease = client.try_acquire("renewed", 0.6, token=TOKEN, auto_renew=True)
            assert lease is not None
            assert lease.lost.wait(3)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "renewal" in logged
    assert "TOKSECRET" not in logged, logged


@pytest.mark.parametrize("node", [b"redis://:" + PASSWORD.encode() + b"@127.0.0.1:26379",
                                  ("127.0.0.1", 26379, PASSWORD)], ids=["bytes-url", "triple"])
def test_a_refused_node_item_is_not_quoted(node: object) -> None:
    for make in (lambda: SentinelLockClient([node], "svc"),
                 lambda: ClusterLockClient("127.0.0.1", 7000, startup_nodes=[node])):
        with pytest.raises(LockError) as raised:
            make()
        assert PASSWORD not in str(raised.value), str(raised.value)
