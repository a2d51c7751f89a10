"""A fenced bulk acquire on a Sentinel client whose master is demoted while a transaction is on
its way. Demoted before MULTI, each queued SET is refused READONLY and the transaction is
sent once more to the new master (the control). Demoted after the SETs were queued but before
EXEC arrives, Redis refuses EXEC itself: ``EXECABORT Transaction discarded because of: READONLY
...``. Nothing ran either way, but the second case is not recognised as READONLY (its code is
EXECABORT) and the acquire fails with a ResponseError instead of going to the new master.

The client's write is split before EXEC (a slow link delivering the rest late), the demotion
done in between on the old master, which the Sentinels already replaced (as in
test_sentinel_readonly_try_acquire)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from turbolock._sync.connection import Connection
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

from ._helpers import sentinel_checks_off, value_on

EXEC = b"*1\r\n$4\r\nEXEC\r\n*1\r\n$7\r\nDISCARD\r\n"  # a transaction's last two commands


@pytest.mark.parametrize("demoted", ["before-multi", "before-exec"])
def test_a_transaction_refused_readonly_at_exec_goes_to_the_new_master(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str, demoted: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel_checks_off(monkeypatch)
    group = own_sentinel_group(replicas=1, sentinels=3)
    client = SentinelLockClient(group.sentinel_urls, group.service, core=core_name, key_prefix=key_prefix,
                                timeout=2.0, connect_timeout=1.0)
    try:
        assert client.query("warm-up").held is False  # a connection to the master
        old_port = group.master_port()
        assert "OK" in group.cli(group.sentinels[0], "sentinel", "failover", group.service)
        new_master = group.wait_failover(old_port)
        old = redis.Redis(host=group.node_at(old_port).host, port=old_port)

        def demote() -> None:
            old.execute_command("REPLICAOF", new_master.host, new_master.port)

        original = Connection.send
        split = [False]

        def send(conn: Any, data: bytes, deadline: float) -> None:
            if split[0] or b"MULTI" not in data or not data.endswith(EXEC):
                return original(conn, data, deadline)
            split[0] = True
            if demoted == "before-multi":
                demote()
                return original(conn, data, deadline)
            original(conn, data[:-len(EXEC)], deadline)
            time.sleep(0.3)  # the server queues every command of the transaction
            demote()
            return original(conn, EXEC, deadline)

        monkeypatch.setattr(Connection, "send", send)
        try:
            names = [f"n{i}" for i in range(5)]
            result = client.acquire_many(names, 10, fenced=True)
        finally:
            monkeypatch.undo()
            old.close()
        assert split[0]
        assert [lease.name for lease in result.acquired] == names
        assert value_on(new_master, key_prefix + "n0") == result.acquired[0].token
    finally:
        client.close()
