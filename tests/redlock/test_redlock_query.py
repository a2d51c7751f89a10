"""RedlockClient.query: held means a quorum of masters still has the key."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from turbolock import QuorumError, RedlockClient
from turbolock.redis_server import RedisServer


def test_query_follows_the_quorum(three: list[RedisServer], make_redlock: Callable[..., RedlockClient],
                                  raws: Callable[[list[RedisServer]], list[redis.Redis]],
                                  key_prefix: str) -> None:
    redlock = make_redlock(three)
    assert redlock.query("q") == (False, None)
    lease = redlock.try_acquire("q", 10)
    assert lease is not None
    info = redlock.query("q")
    assert info.held and info.remaining is not None and 9 < info.remaining <= 10
    assert len(info) == 2  # held and remaining only: never the token
    first, second, third = raws(three)
    key = key_prefix + "q"
    first.pexpire(key, 3000)
    info = redlock.query("q")
    assert info.held and info.remaining is not None and 9 < info.remaining <= 10  # two still hold it fully
    second.pexpire(key, 5000)
    info = redlock.query("q")
    assert info.held and info.remaining is not None and 4 < info.remaining <= 5  # the quorum's weaker one
    first.delete(key)
    info = redlock.query("q")
    assert info.held and info.remaining is not None and 4 < info.remaining <= 5  # second and third
    second.delete(key)
    assert redlock.query("q") == (False, None)  # only one master still has it
    assert third.exists(key) == 1


def test_query_needs_a_quorum_of_answers(own_masters: Callable[[int], list[RedisServer]],
                                         make_redlock: Callable[..., RedlockClient]) -> None:
    servers = own_masters(3)
    redlock = make_redlock(servers, node_timeout=0.05)
    lease = redlock.try_acquire("down", 10)
    assert lease is not None
    servers[0].stop(remove_directory=False)
    assert redlock.query("down").held is True
    servers[1].stop(remove_directory=False)
    with pytest.raises(QuorumError, match=r"the query for .* is undecided"):
        redlock.query("down")
