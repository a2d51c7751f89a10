"""Bulk calls an ACL refuses part of. Redis 7 checks a script's declared keys against the ACL
before it runs, so a multi-key script call (a claim, ``extend_many``, ``release_many``: up to 1000
locks a call) is refused whole with NOPERM and cannot say which key it refused, and a fenced bulk
acquire's transaction (up to 1000 locks) is discarded whole when one of its commands is refused:
the error names every lock of that call, never only the first (a lock the user may well take),
and a release refused so is a ``ResponseError``, not "the connection failed" (it ran nothing:
those locks are still held, and nothing is retried). The single-key paths name the refused lock
alone. A user who may not use MULTI at all has a fenced bulk acquire refused whole too, and what
its commands took on their own is given back."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from turbolock import LockClient, ResponseError
from turbolock.redis_server import RedisServer

PASSWORD = "acl-bulk-Pa55word"
TOKEN = b"T" * 16
COMMANDS = "-@all +set +pttl +evalsha +script|load +get +del +pexpire +spublish +eval +incrby +time"


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    users = [f"user locker on >{PASSWORD} ~p:a* ~{{p:* {COMMANDS} +multi +exec &*",
             f"user nomulti on >{PASSWORD} ~p:* ~{{p:* {COMMANDS} &*"]
    with RedisServer(extra_config=users) as started:
        yield started


@pytest.fixture
def raw(server: RedisServer) -> Iterator[redis.Redis]:
    with redis.Redis(port=server.port) as connection:
        connection.flushall()
        yield connection


@pytest.fixture
def client(server: RedisServer, core_name: str) -> Iterator[LockClient]:
    with LockClient.from_url(f"redis://locker:{PASSWORD}@127.0.0.1:{server.port}/0", core=core_name,
                             key_prefix="p:") as made:
        yield made


def test_a_single_key_path_names_the_refused_lock(client: LockClient) -> None:
    with pytest.raises(ResponseError) as raised:
        client.acquire_many(["a1", "b1", "a2"], 30)
    assert raised.value.code == "NOPERM" and raised.value.names == ["b1"]


@pytest.mark.parametrize("options", [{"fenced": True}, {"limit": 3}], ids=["fenced", "claim"])
def test_a_refused_acquire_call_names_all_its_locks(client: LockClient, raw: redis.Redis,
                                                    options: dict[str, object]) -> None:
    with pytest.raises(ResponseError) as raised:
        client.acquire_many(["a1", "b1", "a2"], 30, **options)  # type: ignore[arg-type]
    assert raised.value.code == "NOPERM"
    assert sorted(raised.value.names) == ["a1", "a2", "b1"], raised.value.names  # a claim starts anywhere
    assert "one call over 3 locks" in str(raised.value)
    assert raw.keys("p:*") == []


def test_a_fenced_bulk_acquire_of_a_user_without_multi_is_refused_and_leaves_no_lock(
        server: RedisServer, raw: redis.Redis, core_name: str) -> None:
    # Refused MULTI: the commands after it run on their own, the SETs unguarded by the fences.
    with LockClient.from_url(f"redis://nomulti:{PASSWORD}@127.0.0.1:{server.port}/0", core=core_name,
                             key_prefix="p:") as client:
        with pytest.raises(ResponseError) as raised:
            client.acquire_many(["a1", "b1", "a2"], 30, fenced=True)
        assert raised.value.code == "NOPERM" and sorted(raised.value.names) == ["a1", "a2", "b1"]
        deadline = time.monotonic() + 3.0
        while raw.keys("p:*") and time.monotonic() < deadline:  # given back in the background
            time.sleep(0.05)
        assert raw.keys("p:*") == []


@pytest.fixture
def mixed(client: LockClient, raw: redis.Redis) -> list:
    leases = client.acquire_many(["a1", "a2"], 30).acquired
    raw.set("p:b1", TOKEN, px=30000)
    return [leases[0], client.lease("b1", TOKEN), leases[1]]


def test_a_refused_extend_call_names_all_its_locks(client: LockClient, mixed: list) -> None:
    with pytest.raises(ResponseError) as raised:
        client.extend_many(mixed, 60)
    per_key = client._exec.offers_set_ifeq()  # Valkey 8.1, Redis 8.4: one SET ... IFEQ per lease
    assert raised.value.code == "NOPERM" and raised.value.names == (["b1"] if per_key else ["a1", "b1", "a2"])


def test_a_refused_release_call_is_a_response_error_and_releases_nothing(client: LockClient, raw: redis.Redis,
                                                                        mixed: list) -> None:
    with pytest.raises(ResponseError) as raised:
        client.release_many(mixed)
    assert raised.value.code == "NOPERM" and raised.value.names == ["a1", "b1", "a2"]
    assert client.pending_cleanup == 0  # nothing owed: the call ran nothing
    assert raw.exists("p:a1", "p:a2") == 2 and mixed[0].valid_for() > 0
    assert client.release_many([mixed[0], mixed[2]]) == [True, True]


def test_the_leases_other_calls_released_say_so(client: LockClient, raw: redis.Redis) -> None:
    """Two script calls of 1000 locks, the second refused: the first call's locks were released,
    and their leases say so (valid_for 0) though the call raised for the second."""
    first = client.acquire_many([f"a{i}" for i in range(1000)], 30).acquired
    last = client.acquire_many(["a1000"], 30).acquired
    raw.set("p:b1", TOKEN, px=30000)
    with pytest.raises(ResponseError) as raised:
        client.release_many([*first, client.lease("b1", TOKEN), *last])
    assert raised.value.code == "NOPERM" and len(raised.value.names) == 2  # the second call's
    assert raw.exists("p:a0", "p:a999") == 0 and raw.exists("p:a1000") == 1
    assert all(lease.valid_for() == 0.0 for lease in first)
    assert last[0].valid_for() > 0 and client.release(last[0])
