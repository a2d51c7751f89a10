"""A fenced bulk acquire on a Sentinel client (threads and asyncio) whose master is demoted while
a transaction is on its way. Demoted before MULTI, each queued SET is refused READONLY and the
transaction is sent once more to the new master (the control). Demoted after the SETs were
queued but before EXEC arrives, Redis refuses EXEC itself: ``EXECABORT Transaction discarded
because of: READONLY ...``. Nothing ran either way; the second case was not recognised as
READONLY (its code is EXECABORT) and the acquire failed with a ResponseError instead of going to
the new master (found in review).

The client's write is split before EXEC (a slow link delivering the rest late), the demotion
done in between on the old master, which the Sentinels already replaced (as in
test_sentinel_readonly_try_acquire)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from turbolock._aio.protocol import RedisProtocol
from turbolock._sync.connection import Connection
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

from ._helpers import TRANSACTION_END, Demotion, sentinel_checks_off, value_on, write_split_at_exec

NAMES = [f"n{i}" for i in range(5)]
DEMOTED = pytest.mark.parametrize("before_exec", [False, True], ids=["before-multi", "before-exec"])


def _is_transaction(data: bytes) -> bool:
    return b"MULTI" in data and data.endswith(TRANSACTION_END)


def _check(result: Any, demotion: Demotion, key_prefix: str) -> None:
    assert [lease.name for lease in result.acquired] == NAMES, (result.failed, result.leases)
    assert value_on(demotion.new_master, key_prefix + "n0") == result.acquired[0].token


@DEMOTED
def test_a_transaction_refused_readonly_goes_to_the_new_master(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str,
        before_exec: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel_checks_off(monkeypatch)
    group = own_sentinel_group(replicas=1, sentinels=3)
    with SentinelLockClient(group.sentinel_urls, group.service, core=core_name, key_prefix=key_prefix,
                            timeout=2.0, connect_timeout=1.0) as client:
        assert client.query("warm-up").held is False  # a connection to the master
        demotion = Demotion(group)
        original = Connection.send
        split = [False]

        def send(conn: Any, data: bytes, deadline: float) -> None:
            if split[0] or not _is_transaction(data):
                return original(conn, data, deadline)
            split[0] = True
            write_split_at_exec(data, lambda part: original(conn, part, deadline), demotion, before_exec)
            return None

        monkeypatch.setattr(Connection, "send", send)
        try:
            result = client.acquire_many(NAMES, 10, fenced=True)
        finally:
            monkeypatch.undo()
            demotion.close()
        assert split[0]
        _check(result, demotion, key_prefix)


@DEMOTED
def test_an_async_transaction_refused_readonly_goes_to_the_new_master(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str,
        before_exec: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel_checks_off(monkeypatch)
    group = own_sentinel_group(replicas=1, sentinels=3)

    async def body() -> None:
        async with AsyncSentinelLockClient(group.sentinel_urls, group.service, core=core_name,
                                           key_prefix=key_prefix, timeout=2.0, connect_timeout=1.0) as client:
            assert (await client.query("warm-up")).held is False
            demotion = await asyncio.to_thread(Demotion, group)
            original = RedisProtocol.flush
            split = [False]

            def flush(conn: Any) -> None:
                transport = conn._transport
                if split[0] or transport is None or not conn._unsent:
                    return original(conn)
                data = conn.buffer.take()
                conn._unsent = 0
                if _is_transaction(data):
                    split[0] = True
                    write_split_at_exec(data, transport.write, demotion, before_exec)
                else:
                    transport.write(data)
                return None

            monkeypatch.setattr(RedisProtocol, "flush", flush)
            try:
                result = await client.acquire_many(NAMES, 10, fenced=True)
            finally:
                monkeypatch.undo()
                demotion.close()
            assert split[0]
            _check(result, demotion, key_prefix)

    asyncio.run(asyncio.wait_for(body(), 60))
