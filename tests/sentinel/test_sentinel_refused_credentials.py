"""README error table: ``AuthenticationError`` = "the server refused the credentials"; and (see
``lock_rules.worth_retrying``) "Refused credentials and a server that is not Redis always end"
a blocking acquire. A single-server client does so: a wrong password raises
``AuthenticationError`` at once, even from ``lock(timeout=...).acquire()``.

A Sentinel client whose ``sentinel_password`` the Sentinels refuse (WRONGPASS) wrapped the
refusal in a plain ``ConnectionError`` ("no Sentinel gave the master ..."): ``try_acquire``
raised the wrong type, and a blocking acquire took it for an unreachable server, waited its whole
timeout and returned False (``with`` raises ``LockNotAcquiredError``): a configuration error
reported as lock contention (found in review)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis

from turbolock import AuthenticationError, ResponseError
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient


@pytest.fixture(scope="module")
def group() -> Iterator[RedisSentinel]:
    with RedisSentinel(replicas=0, sentinels=1) as made:
        sentinel = redis.Redis(port=made.sentinels[0].port)
        sentinel.execute_command("ACL", "SETUSER", "default", "on", "resetpass", ">right-sentinel-pw",
                                 "allcommands")
        sentinel.close()
        yield made


def test_the_right_sentinel_password_works(group: RedisSentinel, core_name: str, key_prefix: str) -> None:
    client = SentinelLockClient(group.sentinel_urls, group.service, sentinel_password="right-sentinel-pw",
                                core=core_name, timeout=1.0, key_prefix=key_prefix)
    try:
        assert client.try_acquire("ok", 5) is not None
    finally:
        client.close()


def test_a_refused_sentinel_password_is_an_authentication_error(group: RedisSentinel, core_name: str) -> None:
    client = SentinelLockClient(group.sentinel_urls, group.service, sentinel_password="wrong-pw",
                                core=core_name, timeout=1.0)
    try:
        with pytest.raises(AuthenticationError):
            client.try_acquire("a", 5)
    finally:
        client.close()


def test_a_blocking_acquire_ends_at_once_on_refused_sentinel_credentials(group: RedisSentinel,
                                                                         core_name: str) -> None:
    client = SentinelLockClient(group.sentinel_urls, group.service, sentinel_password="wrong-pw",
                                core=core_name, timeout=1.0)
    try:
        started = time.monotonic()
        outcome: object
        try:
            outcome = client.lock("b", 5, timeout=3).acquire()
        except AuthenticationError as exc:
            outcome = exc
        assert isinstance(outcome, AuthenticationError), (
            f"acquire() gave {outcome!r} after {time.monotonic() - started:.1f}s: refused credentials "
            "reported as a lock not acquired")
    finally:
        client.close()


def test_async_blocking_acquire_ends_at_once_on_refused_sentinel_credentials(group: RedisSentinel,
                                                                             core_name: str) -> None:
    async def main() -> object:
        client = AsyncSentinelLockClient(group.sentinel_urls, group.service, sentinel_password="wrong-pw",
                                         core=core_name, timeout=1.0)
        try:
            return await client.lock("c", 5, timeout=3).acquire()
        except AuthenticationError as exc:
            return exc
        finally:
            await client.close()

    outcome = asyncio.run(main())
    assert isinstance(outcome, AuthenticationError), f"acquire() gave {outcome!r}"


def test_a_sentinel_user_refused_the_question_ends_a_blocking_acquire(core_name: str) -> None:
    """A Sentinel user not allowed ``SENTINEL get-master-addr-by-name`` (NOPERM) is a
    configuration error too: ``ResponseError`` naming the grant, at once; it was a plain
    ConnectionError, and a blocking acquire waited its whole timeout. Found in review."""
    with RedisSentinel(replicas=0, sentinels=1) as made:
        sentinel = redis.Redis(port=made.sentinels[0].port)
        sentinel.execute_command("ACL", "SETUSER", "asker", "on", ">asker-pw", "+ping", "+hello", "+auth")
        sentinel.close()
        client = SentinelLockClient(made.sentinel_urls, made.service, sentinel_username="asker",
                                    sentinel_password="asker-pw", core=core_name, timeout=1.0)
        try:
            started = time.monotonic()
            with pytest.raises(ResponseError, match="get-master-addr-by-name") as raised:
                client.lock("a", 5).acquire(timeout=10)
            assert time.monotonic() - started < 1.0 and raised.value.code == "NOPERM"
            assert "asker-pw" not in str(raised.value)
        finally:
            client.close()
