"""An asyncio Sentinel client's close() that cannot release its renewed locks names the master
that did not answer; it named the first Sentinel (found in review: the client's own options are
the first Sentinel's address, the pool's connections the master's)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel


@pytest.mark.parametrize("core_name", ["c"], indirect=True)  # a message: no core's own
def test_async_close_warning_names_the_master_not_a_sentinel(caplog: pytest.LogCaptureFixture,
                                                             core_name: str) -> None:
    with RedisSentinel(replicas=1, sentinels=1, down_after=60000) as group:
        master = group.node_at(group.master_port())
        sentinel = group.sentinels[0]

        async def main() -> None:
            client = AsyncSentinelLockClient(group.sentinel_urls, group.service, timeout=0.5,
                                             connect_timeout=0.5, core=core_name)
            lease = await client.try_acquire("job", 10, auto_renew=True)
            assert lease is not None
            master.pause()
            try:
                with caplog.at_level(logging.WARNING, logger="turbolock"):
                    await client.close()
            finally:
                master.resume()

        asyncio.run(main())
        lines = [r.getMessage() for r in caplog.records if "close could not release" in r.getMessage()]
        assert lines, caplog.text
        sentinel_address = f"{sentinel.host}:{sentinel.port}"
        master_address = f"{master.host}:{master.port}"
        # (it names the master when the release timed out; a loaded host may see the connection
        # fail mid-batch instead, named by no address)
        assert sentinel_address not in lines[0], (
            f"the warning blames the Sentinel {sentinel_address} (master {master_address}): {lines[0]}")
