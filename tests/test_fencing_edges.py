"""Fencing's edges: a fenced acquire whose counter fails leaves no lock behind (the bulk call
already gave it back; the single one kept it held for its whole ttl), a fenced claim's error
names the lock whose fence failed (it named the chunk's first), and FencedStore refuses a
key or value of the wrong type, or a fence above what it compares exactly (2**53), with a typed
error naming it, before anything is written. Found in review."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from turbolock import FencedStore, InvalidArgumentTypeError, ResponseError
from turbolock._wire.scripts import fence_counter


def test_a_fenced_acquire_whose_counter_fails_leaves_no_lock(make_client: Callable[..., Any],
                                                             raw: redis.Redis, key_prefix: str) -> None:
    # (FENCED_ACQUIRE serves try_acquire, Lock objects, a Cluster's bulk acquire and Redlock.)
    client = make_client()
    raw.set(fence_counter(key_prefix.encode()), b"not a number")  # what a colliding key leaves there
    with pytest.raises(ResponseError, match="not an integer"):
        client.try_acquire("x", 30, fenced=True)
    deadline = time.monotonic() + 3.0
    while raw.exists(key_prefix + "x") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not raw.exists(key_prefix + "x"), (
        f"an errored fenced acquire left the lock held for {raw.pttl(key_prefix + 'x')} ms more")


@pytest.mark.parametrize("how", [{"blocking": False}, {"timeout": 0}, {"timeout": 1}],
                         ids=["blocking-False", "timeout-0", "waiting"])
def test_a_fair_fenced_attempt_whose_counter_fails_leaves_no_lock(make_client: Callable[..., Any],
                                                                  raw: redis.Redis, key_prefix: str,
                                                                  how: dict[str, Any]) -> None:
    """The fair scripts take the lock, then draw its fence: a counter that fails deletes the lock
    in the same script. A lone try (nothing queued to give back) used to leave it held for its
    whole ttl under a token nobody had."""
    client, other = make_client(), make_client()
    raw.set(fence_counter(key_prefix.encode()), b"not a number")
    with pytest.raises(ResponseError, match="not an integer"):
        client.lock("x", 30, fair=True, fenced=True).acquire(**how)
    assert not raw.exists(key_prefix + "x"), f"left held for {raw.pttl(key_prefix + 'x')} ms more"
    lease = other.try_acquire("x", 1)  # not fenced: the counter is not involved
    assert lease is not None and other.release(lease)


@pytest.mark.parametrize(("call", "argument"), [
    (lambda store, key: store.write(key, None, 1), "value"),
    (lambda store, key: store.write(key, True, 1), "value"),
    (lambda store, key: store.write(None, "v", 1), "key"),
    (lambda store, key: store.read(None, 1), "key"),
    (lambda store, key: store.write_many([(key, "v", 1), (key, None, 2)]), "value"),
    (lambda store, key: store.write(key, "v", 2**53 + 1), "fence"),  # not compared exactly by Lua
], ids=["value-None", "value-bool", "write-key-None", "read-key-None", "write_many-value-None", "huge-fence"])
def test_bad_store_arguments_raise_a_typed_error_naming_them(raw: redis.Redis, key_prefix: str,
                                                             call: Callable[[FencedStore, str], Any],
                                                             argument: str) -> None:
    store = FencedStore(raw)
    key = key_prefix + "k"
    with pytest.raises(InvalidArgumentTypeError) as raised:
        call(store, key)
    assert raised.value.argument == argument  # type: ignore[attr-defined]
    assert raw.exists(key) == 0


def test_a_fenced_claims_error_names_the_lock_that_failed(make_client: Callable[..., Any], raw: redis.Redis,
                                                          key_prefix: str) -> None:
    # The walk starts at a random name: the first name of the chunk is seldom the failing one, the
    # one free name (the only one whose fence is drawn).
    client, others = make_client(), make_client()
    names = [f"shard:{i}" for i in range(10)]
    held = others.acquire_many([name for name in names if name != "shard:6"], 60)
    raw.set(fence_counter(key_prefix.encode()), b"not a number")
    blamed = []
    for _ in range(5):
        with pytest.raises(ResponseError, match="not an integer") as raised:
            client.acquire_many(names, 30, limit=10, fenced=True)
        blamed.append(list(raised.value.names))
        deadline = time.monotonic() + 3.0  # what the failed call took is given back in the background
        while raw.exists(key_prefix + "shard:6") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not raw.exists(key_prefix + "shard:6")
    assert blamed == [["shard:6"]] * 5, f"errors blamed {blamed}; shard:6 is the one whose fence failed"
    assert all(others.release_many(held.acquired))
