"""The operator's tools never take a fence counter for a lock: not the counter a key prefix's names
share on one server (``{<prefix>}:fence``, which only the empty prefix's listing could meet) nor a
name's own on Redis Cluster (``<key>:fence`` for a name with a hash tag: under the prefix, no ttl).
``locks list`` does not list them and ``locks release --force`` does not delete them: a counter
deleted and started again lower would let a stale holder's write through after its successor's.
Found in review."""

from __future__ import annotations

import time

import redis

from turbolock import FencedStore, LockClient, admin
from turbolock._wire.scripts import fence_counter


def test_the_admin_tools_never_list_or_delete_a_fence_counter(client: LockClient, raw: redis.Redis,
                                                              key_prefix: str) -> None:
    store = FencedStore(raw)
    resource = key_prefix + "balance"
    stale = client.try_acquire("{acct}:a", 0.1, fenced=True)
    assert stale is not None
    assert store.write(resource, "stale holder's first write", stale.fence)
    time.sleep(0.2)  # the holder pauses past its ttl
    raw.set(key_prefix + "{acct}:b:fence", 7)  # a Cluster name's own counter, under the prefix
    raw.set(fence_counter(b""), 7)  # the empty prefix's shared counter
    assert raw.exists(fence_counter(key_prefix.encode()))
    assert [held.name for held in admin.held_locks(raw, key_prefix)] == []  # nobody holds a lock
    assert [held.name for held in admin.held_locks(raw, "", match="{}*")] == []
    for prefix, counter in ((key_prefix, "{acct}:b:fence"), ("", "{}:fence")):
        assert admin.inspect(raw, counter, prefix) is None
        assert not admin.force_release(raw, counter, prefix)  # what `locks release --force` runs
    assert raw.get(fence_counter(b"")) == b"7" and raw.get(key_prefix + "{acct}:b:fence") == b"7"
    successor = client.try_acquire("{acct}:a", 10, fenced=True)
    assert successor is not None and successor.fence > stale.fence
    assert store.write(resource, "successor", successor.fence)
    assert not store.write(resource, "stale holder's late write", stale.fence)
    assert client.release(successor)
    raw.delete(fence_counter(b""))  # no other test's: the suite's prefixes are never empty
