"""On Redis Cluster every fenced path draws a name's fence from that name's own counter in its
slot (single, bulk, claim, Lock object, fair Lock), never from a prefix-wide one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from _fence_paths import fences_by_every_path
from turbolock._wire.scripts import fence_counter
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer


def test_every_fenced_path_uses_the_names_own_counter(
        cluster: RedisCluster, make_client: Callable[..., Any], key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis]) -> None:
    name = "acct"
    seen = fences_by_every_path(make_client(), name, bulk_with=["x1", "y1"])
    # One counter for the name alone: each grant its next value.
    assert seen == list(range(seen[0], seen[0] + len(seen))), seen
    key = (key_prefix + name).encode()
    counter = b"{" + key + b"}:fence"
    owner = raws(cluster.master_of(key_slot(key)))
    assert owner.get(counter) == b"%d" % seen[-1]
    shared = fence_counter(key_prefix.encode())
    assert raws(cluster.master_of(key_slot(shared))).exists(shared) == 0
