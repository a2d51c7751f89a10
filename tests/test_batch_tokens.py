"""A bulk acquire's tokens: one fresh random token per send, shared by that send's locks, and a
lease that keeps no key of its own (made from its name when a command needs it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from turbolock import LockClient
from turbolock._flows import bulk_plan
from turbolock._flows.bulk_plan import AcquirePlan
from turbolock._wire import core as _core
from turbolock._wire.validate import encode_name
from turbolock.lease import Lease, keys_of
from turbolock.redis_server import RedisServer


@pytest.fixture
def chunked(redis_server: RedisServer, core_name: str, key_prefix: str) -> Iterator[LockClient]:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix,
                             chunk_size=1000) as client:
        yield client


def test_each_chunk_of_a_bulk_acquire_has_its_own_fresh_token(chunked: LockClient, raw: redis.Redis) -> None:
    names = [f"batch:{i}" for i in range(2500)]
    first = chunked.acquire_many(names, 30).acquired
    assert len(first) == 2500
    stored = raw.mget([chunked.key_prefix + lease.key for lease in first])
    assert stored == [lease.token for lease in first], "each lease holds the token its key has"
    by_chunk = [{lease.token for lease in first[start:start + 1000]} for start in (0, 1000, 2000)]
    assert all(len(tokens) == 1 for tokens in by_chunk), "the locks of one send share one token"
    assert len(set.union(*by_chunk)) == 3 and all(len(t) == 16 for t in set.union(*by_chunk))
    assert chunked.release_many(first) == [True] * 2500

    again = chunked.acquire_many(names, 30).acquired
    assert not {lease.token for lease in again} & set.union(*by_chunk), "a new call draws new tokens"
    # A token opens only the keys of its own send: another client's lock is untouched.
    key = chunked.key_prefix + b"batch:7"
    raw.set(key, b"someone else's token", px=30_000)
    assert chunked.release_many(again) == [i != 7 for i in range(2500)]
    assert raw.get(key) == b"someone else's token"


def _tokens_of_two_sends(core_name: str) -> tuple[set[bytes], set[bytes]]:
    """The tokens a plan sends for the same three locks twice (a Cluster master's share sent
    again after MOVED, ASK or a failover)."""
    plan = AcquirePlan(["a", "b", "c"], 30_000, None, object(), _core.get_core(core_name), False)
    buf = _core.get_core(core_name).CommandBuffer(b"p:")
    plan.encode_indices(buf, [0, 1, 2])
    first = set(plan.tokens)
    plan.encode_indices(buf, [0, 1, 2])
    return first, set(plan.tokens)


def test_a_resend_draws_a_new_token(core_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The earlier send's reply may be lost and its locks released with its token in the
    # background: that token must not open what the later send took.
    first, second = _tokens_of_two_sends(core_name)
    assert len(first) == len(second) == 1 and not first & second

    monkeypatch.setattr(bulk_plan, "batch_tokens", lambda count: [b"t" * 16] * count)  # control
    first, second = _tokens_of_two_sends(core_name)
    assert first & second, "the check above catches a plan that sends one token twice"


class Name(str):
    pass


class Raw(bytes):
    pass


def test_a_lease_key_is_its_encoded_name(core_name: str) -> None:
    core = _core.get_core(core_name)
    names: list[str | bytes] = ["plain", "ünï", b"\xff\x00bytes", Name("sub"), Raw(b"raw-sub")]
    leases = [Lease(name, b"t" * 16, 1000, 0.0, None) for name in names]
    expected = [encode_name(name) for name in names]
    assert [lease.key for lease in leases] == expected
    assert keys_of(leases, core) == expected
    assert keys_of(leases[:2], core) == expected[:2]  # every name a str: the core's one pass
    assert all(type(key) is bytes for key in keys_of(leases, core))


class Tagged(str):
    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return b"tag:" + str.encode(self, encoding, errors)


def test_a_str_subclass_name_keeps_its_own_encoding(chunked: LockClient, raw: redis.Redis) -> None:
    # Its acquire sent the key its own encode() made; its release and renewals must send that one.
    lease = chunked.acquire_many([Tagged("y")], 30).acquired[0]
    assert raw.get(chunked.key_prefix + b"tag:y") == lease.token
    plain = Lease("plain", b"t" * 16, 1000, 0.0, None)
    assert keys_of([lease], chunked.core) == keys_of([lease, plain], chunked.core)[:1] == [b"tag:y"]
    assert chunked.release_many([lease]) == [True]
    assert raw.get(chunked.key_prefix + b"tag:y") is None
