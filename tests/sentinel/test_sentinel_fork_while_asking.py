"""A process forked while another thread of the parent (a call finding the master, or the watcher
every few seconds) asks a Sentinel: the Sentinels' lock it held was kept in the child, held by
a thread that is not there, and the child's first call hung past its deadline. Found in review."""

from __future__ import annotations

import pytest

from _forking import in_child_forked_while_held
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the same at-fork code on both


def test_a_child_forked_while_a_sentinel_is_asked_can_call(sentinel_group: RedisSentinel, core_name: str,
                                                           key_prefix: str) -> None:
    client = SentinelLockClient(sentinel_group.sentinel_urls, sentinel_group.service, core=core_name,
                                key_prefix=key_prefix, timeout=1.0)

    def work() -> str:
        try:
            lease = client.try_acquire("child", 10)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "not acquired" if lease is None else "acquired" if client.release(lease) else "not released"

    try:
        assert in_child_forked_while_held(client._sentinels._lock, work, limit=8.0) == "acquired"
    finally:
        client.close()
