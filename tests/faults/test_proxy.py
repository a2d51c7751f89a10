"""The loopback proxy's modes do what the network faults need: dropping one direction loses the
requests (nothing runs) or only the replies (the command runs, nobody hears), a delay adds
latency in order, and healing forwards again."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from _netfaults import FaultProxy
from turbolock.redis_server import RedisServer


@pytest.fixture
def proxy(resource_server: RedisServer) -> Iterator[FaultProxy]:
    with FaultProxy(resource_server.host, resource_server.port) as made:
        yield made


def _through(proxy: FaultProxy) -> redis.Redis:
    """redis-py through the proxy, with no retries: one timeout is the answer."""
    return redis.Redis(host=proxy.host, port=proxy.port, socket_timeout=0.2, retry=Retry(NoBackoff(), 0))


def test_dropping_requests_runs_nothing(proxy: FaultProxy, resource_server: RedisServer) -> None:
    key = f"proxy:{uuid.uuid4().hex}"
    client = _through(proxy)
    assert client.ping()
    proxy.drop(to_server=True, to_client=False)
    with pytest.raises(redis.TimeoutError):
        client.set(key, 1)
    assert redis.Redis(host=resource_server.host, port=resource_server.port).get(key) is None


def test_dropping_replies_runs_the_command_unheard(proxy: FaultProxy, resource_server: RedisServer) -> None:
    key = f"proxy:{uuid.uuid4().hex}"
    client = _through(proxy)
    assert client.ping()
    proxy.drop(to_server=False, to_client=True)
    with pytest.raises(redis.TimeoutError):
        client.set(key, 1)
    assert redis.Redis(host=resource_server.host, port=resource_server.port).get(key) == b"1"
    proxy.heal()
    assert _through(proxy).ping(), "a new connection works once healed"


def test_a_delay_adds_latency_in_order(proxy: FaultProxy) -> None:
    client = redis.Redis(host=proxy.host, port=proxy.port, socket_timeout=2)
    assert client.ping()
    proxy.delay(0.03, 0.06)
    started = time.monotonic()
    pipe = client.pipeline(transaction=False)
    for i in range(20):
        pipe.echo(str(i))
    assert pipe.execute() == [str(i).encode() for i in range(20)]
    assert client.ping()
    elapsed = time.monotonic() - started
    assert elapsed >= 0.12, f"two round trips with 30-60 ms each way took only {elapsed:.3f}s"
    proxy.heal()
    started = time.monotonic()
    assert client.ping()
    assert time.monotonic() - started < 0.03
