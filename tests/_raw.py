"""redis-py on a test's own server, to look at (or tamper with) keys behind the client's back."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import redis

from turbolock.redis_server import RedisServer


def raw_connection(server: RedisServer) -> Iterator[redis.Redis]:
    """For a fixture to ``yield from``: redis-py on ``server``, closed after the test."""
    connection = redis.Redis(host=server.host, port=server.port)
    yield connection
    connection.close()


Raws = Callable[[list[RedisServer]], list[redis.Redis]]
"""The ``raws`` fixture of tests/conftest.py: ``raws(masters)``, redis-py on each master."""

NodeRaws = Callable[[RedisServer], redis.Redis]
"""The ``raws`` fixture of tests/cluster/conftest.py: ``raws(node)``, redis-py on one node."""
