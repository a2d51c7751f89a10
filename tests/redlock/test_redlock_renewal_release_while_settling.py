"""Redlock: a lease released while the renewal round that renewed it is being settled stays
released (see tests/test_renewal_release_while_settling.py), and is not counted extended.
Found in review."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from _release_race import assert_stays_released, release_while_settling
from turbolock import RedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing


def test_a_released_lease_stays_released_when_a_round_renewed_it(
        three: list[RedisServer], make_redlock: Callable[..., RedlockClient],
        raws: Callable[[list[RedisServer]], list[redis.Redis]], key_prefix: str) -> None:
    client = make_redlock(three)
    connections = raws(three)

    def steal(name: str) -> None:
        for raw in connections:
            raw.set(key_prefix + name, b"thief", px=10_000)

    victim = release_while_settling(client, steal, same_batch=True)
    assert [raw.exists(key_prefix + "victim") for raw in connections] == [0, 0, 0]
    assert victim.extensions == 0
    assert_stays_released(victim)
