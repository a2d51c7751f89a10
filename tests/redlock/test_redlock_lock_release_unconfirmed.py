"""A RedlockLock whose release went out but no majority confirmed (two of three masters stopped:
``QuorumError``, the release owed on them in the background) lets go of its lease, as it does
after a release whose reply was lost: once the masters answer and the owed release ran, the
same Lock object takes the lock again. It kept the lease, for a release that never went out,
and then claimed the lock for ever (found in review)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from _eventually import eventually
from turbolock import RedlockClient
from turbolock.errors import QuorumError
from turbolock.redis_server import RedisServer


def test_a_redlock_lock_whose_release_went_out_unconfirmed_lets_go(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str) -> None:
    servers = own_masters(3)
    with RedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                       node_timeout=0.1) as client:
        lock = client.lock("seat", 10)
        assert lock.acquire(blocking=False)
        for server in servers[1:]:
            server.pause()
        try:
            with pytest.raises(QuorumError):
                lock.release()
        finally:
            for server in servers[1:]:
                server.resume()
        assert eventually(lambda: all(m.pending_cleanup == 0 for m in client.masters), 5)
        assert client.query("seat").held is False  # the owed release ran
        assert lock.acquire(blocking=False), "the Lock object still claimed the lock"
        lock.release()
