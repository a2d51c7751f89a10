"""An ``on_lost`` callback that calls ``sys.exit()`` (a "stop this worker" reflex) ends only the
thread it runs on, the client's renewer: that thread died, and every other lock of the client
was neither renewed nor reported lost, its key expiring while ``lease.lost`` stayed unset (found
in review). Now the renewer logs it as an error and goes on."""

from __future__ import annotations

import logging
import sys
import time

import pytest
import redis

from turbolock import Lease, LockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the renewer's rule: no core's own

TTL = 0.6


def test_sys_exit_in_on_lost_leaves_the_other_locks_renewed(
        redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    def quit_worker(lease: Lease) -> None:
        sys.exit(1)

    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client, \
            caplog.at_level(logging.ERROR, logger="turbolock"):
        doomed = client.try_acquire("doomed", TTL, auto_renew=True, on_lost=quit_worker)
        kept = client.try_acquire("kept", TTL, auto_renew=True)
        assert doomed is not None and kept is not None
        raw.delete(client.key_prefix + b"doomed")
        assert doomed.lost.wait(TTL * 3)
        time.sleep(TTL * 3)
        assert raw.get(client.key_prefix + b"kept") == kept.token and not kept.is_lost, (
            f"'kept' was not renewed after the callback's sys.exit(): PTTL "
            f"{raw.pttl(client.key_prefix + b'kept')}, lost={kept.is_lost}")
    assert any("called sys.exit()" in record.getMessage() for record in caplog.records), caplog.text
