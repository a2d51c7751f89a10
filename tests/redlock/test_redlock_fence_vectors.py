"""Redlock fence vectors (``lease.fences``, a ``MasterFences``) in ``FencedStore``: a plain tuple
or list of the numbers is refused (its fields would be named by position, never compared with the
named ones, so a stale holder's write was accepted after its successor's), and a lease's fences
survive copy, deepcopy and pickle with their masters' names (to hand them to the process that
writes). Both found in review."""

from __future__ import annotations

import copy
import pickle
import time
from collections.abc import Callable

import pytest
import redis

from turbolock import FencedStore, InvalidArgumentTypeError, RedlockClient
from turbolock.redis_server import RedisServer


def test_a_plain_sequence_of_fences_is_not_compared_by_position(
        three: list[RedisServer], make_redlock: Callable[..., RedlockClient], key_prefix: str) -> None:
    client = make_redlock(three)
    raw = redis.Redis(host=three[0].host, port=three[0].port)
    store = FencedStore(raw)
    key = key_prefix + "balance"
    try:
        stale = client.try_acquire("acct", 0.2, fenced=True)
        assert stale is not None and all(isinstance(fence, int) for fence in stale.fences)
        numbers = list(stale.fences)  # e.g. sent to the writer as JSON: the numbers, in order
        time.sleep(0.3)  # the holder pauses past its ttl
        fresh = client.try_acquire("acct", 10, fenced=True)
        assert fresh is not None and fresh.fences == tuple(fence + 1 for fence in stale.fences)
        assert store.write(key, "successor", fresh.fences)
        with pytest.raises(InvalidArgumentTypeError) as refused:
            store.write(key, "stale", numbers)
        assert refused.value.argument == "fence"
        assert raw.hget(key, "value") == b"successor"
    finally:
        raw.close()


@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy, lambda f: pickle.loads(pickle.dumps(f))],
                         ids=["copy", "deepcopy", "pickle"])
def test_a_leases_fences_survive_copy_and_pickle(three: list[RedisServer],
                                                 make_redlock: Callable[..., RedlockClient],
                                                 duplicate: Callable[[object], object]) -> None:
    client = make_redlock(three)
    lease = client.try_acquire("acct", 10, fenced=True)
    assert lease is not None
    again = duplicate(lease.fences)
    assert again == lease.fences and again.masters == lease.fences.masters  # type: ignore[attr-defined]
    assert client.release(lease)
