"""The asyncio twin of tests/sentinel/test_sentinel_readonly_at_exec.py: a fenced bulk acquire whose master is
demoted before MULTI or between the queued SETs and EXEC goes to the new master."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from turbolock._aio.protocol import RedisProtocol
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_checks_off, value_on

EXEC = b"*1\r\n$4\r\nEXEC\r\n*1\r\n$7\r\nDISCARD\r\n"


@pytest.mark.parametrize("demoted", ["before-multi", "before-exec"])
def test_async_transaction_refused_readonly_goes_to_the_new_master(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str, demoted: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel_checks_off(monkeypatch)
    group = own_sentinel_group(replicas=1, sentinels=3)

    async def body() -> None:
        client = AsyncSentinelLockClient(group.sentinel_urls, group.service, core=core_name,
                                         key_prefix=key_prefix, timeout=2.0, connect_timeout=1.0)
        try:
            assert (await client.query("warm-up")).held is False
            old_port = group.master_port()
            assert "OK" in group.cli(group.sentinels[0], "sentinel", "failover", group.service)
            new_master = await asyncio.to_thread(group.wait_failover, old_port)
            old = redis.Redis(host=group.node_at(old_port).host, port=old_port)

            def demote() -> None:
                old.execute_command("REPLICAOF", new_master.host, new_master.port)

            original = RedisProtocol.flush
            split = [False]

            def flush(conn: Any) -> None:
                transport = conn._transport
                if split[0] or transport is None or not conn._unsent:
                    return original(conn)
                data = conn.buffer.take()
                if b"MULTI" not in data or not data.endswith(EXEC):
                    conn._unsent = 0
                    transport.write(data)
                    return None
                split[0] = True
                conn._unsent = 0
                if demoted == "before-multi":
                    demote()
                    transport.write(data)
                    return None
                transport.write(data[:-len(EXEC)])
                time.sleep(0.3)
                demote()
                transport.write(EXEC)
                return None

            monkeypatch.setattr(RedisProtocol, "flush", flush)
            try:
                names = [f"n{i}" for i in range(5)]
                result = await client.acquire_many(names, 10, fenced=True)
            finally:
                monkeypatch.undo()
                old.close()
            assert split[0]
            assert [lease.name for lease in result.acquired] == names, (result.failed, result.leases)
            assert value_on(new_master, key_prefix + "n0") == result.acquired[0].token
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(body(), 60))
