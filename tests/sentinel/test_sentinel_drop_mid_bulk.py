"""The blocking Sentinel client drops its connections when the master changes; a bulk call that
holds one then (its chunks go out while it reads the earlier ones) sends nothing more on it:
its chunks written before the drop are read, the rest go once more, to the master the
Sentinels name (the same one here). It sent them on to the server it had just been told is no
longer the master, as the asyncio client did (tests/sentinel/test_async_sentinel_drop_unsent.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from turbolock import SentinelLockClient
from turbolock._flows.bulk_plan import AcquirePlan
from turbolock._sync.connection import Connection
from turbolock.redis_sentinel import RedisSentinel

NAMES = [f"batch:{i}" for i in range(6000)]


@pytest.fixture
def group(own_sentinel_group: Callable[..., RedisSentinel]) -> RedisSentinel:
    return own_sentinel_group(replicas=0, sentinels=1, down_after=60000)


def test_a_bulk_call_sends_nothing_on_a_dropped_connection(group: RedisSentinel, core_name: str,
                                                           key_prefix: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    client = SentinelLockClient(group.sentinel_urls, group.service, core=core_name, key_prefix=key_prefix,
                                chunk_size=1000)
    sends: list[bool] = []  # per chunk sent: did its connection still go to the master to use?
    original_send, original_encode = Connection.send, AcquirePlan.encode

    def send(conn: Connection, data: bytes, deadline: float) -> None:
        sends.append(client._pool.current(conn))
        original_send(conn, data, deadline)

    def encode(plan: AcquirePlan, buf: Any, start: int, stop: int) -> None:
        if start == 3000 and not dropped:
            dropped.append(True)
            client._pool.drop_all()
        original_encode(plan, buf, start, stop)

    dropped: list[bool] = []
    try:
        assert client.query("warm-up").held is False
        monkeypatch.setattr(Connection, "send", send)
        monkeypatch.setattr(AcquirePlan, "encode", encode)
        result = client.acquire_many(NAMES, 30)
        monkeypatch.undo()
        assert dropped
        assert len(result.acquired) == len(NAMES)
        assert False not in sends, f"{sends.count(False)} chunks sent on the dropped connection"
        assert client.release_many(result.acquired) == [True] * len(NAMES)
    finally:
        monkeypatch.undo()
        client.close()
