"""The lease's belief bookkeeping (``turbolock.lease``) under a command that got no reply."""

from __future__ import annotations

import time

import pytest

from turbolock import LockClient
from turbolock.lease import commands_sent
from turbolock.redis_server import RedisServer


def test_an_unanswered_longer_extend_never_raises_the_belief(
        redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    """Untested before review: ``lease.commands_unknown`` setting the belief to the unanswered
    command's expiry even when that is later than what was believed (``if expiry <
    _believed(lease)`` dropped). An extend with no reply may not have run: the belief can only
    go down."""
    from turbolock.lease import commands_unknown

    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        lease = client.try_acquire("unknown", 5)
        assert lease is not None
        believed = lease.expires_at
        sent = time.monotonic()
        commands_sent((lease,), sent, sent + 30)  # extend to 30 s ...
        commands_unknown((lease,), sent)          # ... no reply
        assert lease.expires_at == pytest.approx(believed), "an unanswered extend raised the belief"
        assert lease.valid_for() <= 5
        assert client.release(lease)
