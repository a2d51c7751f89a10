"""A fenced or fair lock's keys must share one cluster slot, so no '}' outside a hash tag: when
the '}' is in the client's key prefix, the error names ``key_prefix``, not the lock's name
(which holds none); a bulk call's error names ``names``. Refused before anything is sent."""

from __future__ import annotations

import pytest
import redis

from turbolock import InvalidArgumentError, LockClient
from turbolock.redis_server import RedisServer


def _under(raw: redis.Redis, prefix: str) -> list[bytes]:
    return [key for key in raw.scan_iter(count=1000) if key.startswith(prefix.encode())]


@pytest.mark.parametrize("prefix", ["app}:", "{}", "a}{b"])
def test_a_brace_in_the_prefix_is_blamed_on_the_prefix(redis_server: RedisServer, raw: redis.Redis,
                                                       prefix: str) -> None:
    with LockClient.from_url(redis_server.url, key_prefix=prefix) as client:
        calls = [lambda: client.try_acquire("job", 10, fenced=True),
                 lambda: client.acquire_many(["job", "other"], 10, fenced=True),
                 lambda: client.lock("job", 10, fair=True),
                 lambda: client.lock("job", 10, fenced=True)]
        for call in calls:
            with pytest.raises(InvalidArgumentError) as refused:
                call()
            assert refused.value.argument == "key_prefix", refused.value
        assert _under(raw, prefix) == []  # every refusal came before anything was sent
        lease = client.try_acquire("job", 10)
        assert lease is not None  # a plain lock has no keys of its own
        assert _under(raw, prefix) == [prefix.encode() + b"job"]
        assert client.release(lease)  # the prefix is shared ("{}": tests/test_admin_counters.py lists it)


def test_a_brace_in_a_name_is_blamed_on_the_name(redis_server: RedisServer, key_prefix: str,
                                                 raw: redis.Redis) -> None:
    with LockClient.from_url(redis_server.url, key_prefix=key_prefix) as client:
        with pytest.raises(InvalidArgumentError) as single:
            client.try_acquire("a}b", 10, fenced=True)
        with pytest.raises(InvalidArgumentError) as bulk:
            client.acquire_many(["fine", "a}b"], 10, fenced=True)
    assert (single.value.argument, bulk.value.argument) == ("name", "names")
    assert raw.keys(f"{key_prefix}*") == []
