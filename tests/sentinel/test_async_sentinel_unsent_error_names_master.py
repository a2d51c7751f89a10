"""An asyncio Sentinel client whose master stopped answering: the next call's
``UnsentTimeoutError`` ("nothing was sent to <address>") named the first Sentinel's address,
not the master's (``SentinelPool`` is made with the client's own options, which carry the
first Sentinel's address; found in review). Nothing was ever to be sent to that Sentinel; an
operator reading the error would look at the wrong server. The pool's ``server`` names the
master now. (The second call's error is the master's connect timing out since the connect ends
a little before its caller's deadline, as the threaded client's: a TimeoutError naming the master,
the server to blame, not an UnsentTimeoutError.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from turbolock import LockError, TimeoutError
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel

pytestmark = pytest.mark.timing

T = 0.3


@pytest.fixture(scope="module")
def group() -> Iterator[RedisSentinel]:
    with RedisSentinel(replicas=1, sentinels=3, down_after=60000) as made:
        yield made


def test_an_unsent_timeout_does_not_name_a_sentinel_as_the_server(group: RedisSentinel, core_name: str,
                                                                   key_prefix: str) -> None:
    master = group.node_at(group.master_port())

    async def scenario() -> list[LockError]:
        client = AsyncSentinelLockClient(group.sentinel_urls, group.service, core=core_name,
                                         key_prefix=key_prefix, timeout=T, connect_timeout=T)
        errors: list[LockError] = []
        try:
            assert (await client.query("warm-up")).held is False
            master.pause()
            try:
                for _ in range(2):  # a timeout on the master, then a call that cannot reach it
                    try:
                        await client.query("warm-up")
                    except LockError as exc:
                        errors.append(exc)
            finally:
                master.resume()
        finally:
            await client.close()
        return errors

    errors = asyncio.run(scenario())
    assert len(errors) == 2 and all(isinstance(error, TimeoutError) for error in errors), errors
    assert f":{master.port}" in str(errors[1]), errors[1]
    sentinel_ports = {f":{node.port}" for node in group.sentinels}
    for error in errors:
        named = [port for port in sentinel_ports if port in str(error)]
        assert not named, f"the error names Sentinel {named} as the server nothing was sent to: {error}"
