"""What Sentinel tests share beyond their fixtures."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import Fronts
from turbolock._aio import sentinel as aio_sentinel
from turbolock._sync import sentinel as sync_sentinel
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.redis_server import RedisServer
from turbolock.sentinel import SentinelLockClient


def sentinel_fronts(front: str, group: RedisSentinel, core_name: str, key_prefix: str,
                    **options: Any) -> Fronts:
    """``Fronts`` of SentinelLockClients, or of their asyncio twins, watching ``group``."""
    return Fronts(front, partial(SentinelLockClient, group.sentinel_urls, group.service),
                  partial(AsyncSentinelLockClient, group.sentinel_urls, group.service), core=core_name,
                  key_prefix=key_prefix, **options)


def sentinel_checks_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """No client asks the Sentinels once a second on its own (it would narrow a window a test
    opens on purpose to about a second): a call's own guard is what the test sees."""
    monkeypatch.setattr(sync_sentinel, "CHECK_INTERVAL", 3600.0)
    monkeypatch.setattr(aio_sentinel, "CHECK_INTERVAL", 3600.0)


def value_on(node: RedisServer, key: str) -> bytes | None:
    """``key``'s value on ``node``, read on a connection of its own."""
    raw = redis.Redis(host=node.host, port=node.port)
    try:
        value: bytes | None = raw.get(key)
        return value
    finally:
        raw.close()


TRANSACTION_END = b"*1\r\n$4\r\nEXEC\r\n*1\r\n$7\r\nDISCARD\r\n"
"""The last two commands of a fenced bulk acquire's transaction, as written."""


class Demotion:
    """A Sentinel failover of ``group``'s master whose old master keeps running as one: clients
    still connected to it write there until ``demote()`` makes it a replica of ``new_master``."""

    def __init__(self, group: RedisSentinel) -> None:
        old_port = group.master_port()
        assert "OK" in group.cli(group.sentinels[0], "sentinel", "failover", group.service)
        self.new_master = group.wait_failover(old_port)
        self._old = redis.Redis(host=group.node_at(old_port).host, port=old_port)

    def demote(self) -> None:
        self._old.execute_command("REPLICAOF", self.new_master.host, self.new_master.port)

    def close(self) -> None:
        self._old.close()


def write_split_at_exec(data: bytes, write: Callable[[bytes], object], demotion: Demotion,
                        before_exec: bool) -> None:
    """Write a transaction's ``data`` with the old master demoted on the way: before it all, or
    (``before_exec``) after its commands were queued and before its EXEC arrives."""
    if not before_exec:
        demotion.demote()
        write(data)
        return
    write(data[:-len(TRANSACTION_END)])
    time.sleep(0.3)  # the server queues every command of the transaction
    demotion.demote()
    write(TRANSACTION_END)
