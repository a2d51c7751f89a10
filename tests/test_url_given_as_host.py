"""A URL given where a host goes (``LockClient("redis://:pw@host:6379/0")``, the common slip for
``from_url``; a Sentinel or a Redis Cluster start-up node given as (URL, port)) was taken as a
host name: the password then showed in the client's repr and in its first call's
ConnectionError, after a DNS lookup of the URL. It is refused when the client is made, naming
the argument, without quoting the value. Found in review."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from turbolock import ClusterLockClient, InvalidArgumentError, LockClient, SentinelLockClient
from turbolock.asyncio import AsyncClusterLockClient, AsyncLockClient, AsyncSentinelLockClient

SECRET = "Sup3rSECRETpw"
URL = f"redis://:{SECRET}@127.0.0.1:1/0"

MAKERS = [
    pytest.param(lambda host: LockClient(host), "host", id="LockClient"),
    pytest.param(lambda host: AsyncLockClient(host), "host", id="AsyncLockClient"),
    pytest.param(lambda host: ClusterLockClient(host), "host", id="ClusterLockClient"),
    pytest.param(lambda host: AsyncClusterLockClient(host), "host", id="AsyncClusterLockClient"),
    pytest.param(lambda host: ClusterLockClient(startup_nodes=[(host, 7000)]), "startup_nodes",
                 id="cluster-start-up-node"),
    pytest.param(lambda host: SentinelLockClient([(host, 26379)], "mymaster"), "sentinels", id="Sentinel"),
    pytest.param(lambda host: AsyncSentinelLockClient([(host, 26379)], "mymaster"), "sentinels",
                 id="AsyncSentinel"),
]


@pytest.mark.parametrize(("make", "argument"), MAKERS)
@pytest.mark.parametrize("host", [URL, "user:" + SECRET + "@127.0.0.1", "127.0.0.1/" + SECRET,
                                  "bad host" + SECRET, "127.0.0.1\x00" + SECRET],
                         ids=["url", "user-info", "path", "space", "nul"])
def test_a_url_as_the_host_is_refused_without_showing_it(make: Callable[[str], Any], argument: str,
                                                         host: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        make(host)
    assert caught.value.argument == argument
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value)


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "::1", "redis-0.redis.svc.cluster.local"])
def test_host_names_and_addresses_are_taken(host: str) -> None:
    client = LockClient(host, 1)
    try:
        assert client.options.host == host
    finally:
        client.close()
