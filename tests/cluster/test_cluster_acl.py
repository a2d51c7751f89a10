"""An ACL user with the least a cluster lock client needs (the single-server minimum of
``tests/test_acl.py`` plus ``cluster|shards``, ``cluster|slots``, ``cluster|myid`` and ``asking``)
takes, renews (the ARGV-form renewal script's keys are checked against the user's key pattern
too) and releases locks on every master; wrong credentials fail with a typed error that does
not show them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import redis

from turbolock import AuthenticationError
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

PASSWORD = "Clu5ter-Secret-Pa55"
WRONG_PASSWORD = "Wr0ng-Clu5ter-Guess"
COMMANDS = ["+set", "+pttl", "+evalsha", "+script|load", "+get", "+del", "+pexpire", "+cluster|shards",
            "+cluster|slots", "+cluster|myid", "+asking"]


@pytest.fixture
def locker(cluster: RedisCluster, key_prefix: str,
           raws: Callable[[RedisServer], redis.Redis]) -> Iterator[str]:
    """A user ``locker`` on every node, allowed the commands above on this test's keys only."""
    for node in cluster.nodes:
        raws(node).execute_command("ACL", "SETUSER", "locker", "reset", "on", f">{PASSWORD}",
                                   f"~{key_prefix}*", "-@all", *COMMANDS)
    yield cluster.url.replace("redis://", f"redis://locker:{PASSWORD}@")
    for node in cluster.nodes:
        raws(node).execute_command("ACL", "DELUSER", "locker")


def test_the_least_privileged_user_takes_renews_and_releases(locker: str, core_name: str,
                                                             key_prefix: str) -> None:
    with ClusterLockClient.from_url(locker, key_prefix=key_prefix, core=core_name) as client:
        lease = client.try_acquire("order:1", 10)
        assert lease is not None and client.extend(lease, 20) and client.check(lease) is not None
        names = [f"job:{i}" for i in range(300)]
        renewed = client.acquire_many(names, 0.6, auto_renew=True).acquired
        assert len(renewed) == 300
        time.sleep(1.5)
        assert all(info.held for info in client.query_many(names)), "renewal was refused"
        assert client.release_many(renewed) == [True] * 300
        assert client.release(lease)
        assert PASSWORD not in repr(client)


def test_wrong_credentials_fail_typed_and_unshown(locker: str, core_name: str, key_prefix: str) -> None:
    with ClusterLockClient.from_url(locker.replace(PASSWORD, WRONG_PASSWORD), key_prefix=key_prefix,
                                    core=core_name, timeout=2) as client:
        with pytest.raises(AuthenticationError) as info:
            client.try_acquire("order:1", 10)
        assert WRONG_PASSWORD not in str(info.value) and PASSWORD not in str(info.value)
