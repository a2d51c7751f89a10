"""The operator's tools never take a lock's own keys for locks: a fence counter (``<key>:fence``
for a name with a hash tag: under the prefix, no ttl) is not listed by ``locks list`` nor deleted
by ``locks release --force``, which would restart the name's fences at 1 and let a stale
holder's write through after its successor's. Found in review."""

from __future__ import annotations

import time

import redis

from turbolock import FencedStore, LockClient, admin


def test_the_admin_tools_never_list_or_delete_a_fence_counter(client: LockClient, raw: redis.Redis,
                                                              key_prefix: str) -> None:
    store = FencedStore(raw)
    resource = key_prefix + "balance"
    for _ in range(2):
        lease = client.try_acquire("{acct}:a", 10, fenced=True)
        assert lease is not None and client.release(lease)
    stale = client.try_acquire("{acct}:a", 0.1, fenced=True)
    assert stale is not None and stale.fence == 3
    assert store.write(resource, "stale holder's first write", stale.fence)
    time.sleep(0.2)  # the holder pauses past its ttl
    assert raw.exists(key_prefix + "{acct}:a:fence")  # the counter is there, under the prefix
    assert [held.name for held in admin.held_locks(raw, key_prefix)] == []  # nobody holds a lock
    assert admin.inspect(raw, "{acct}:a:fence", key_prefix) is None
    assert not admin.force_release(raw, "{acct}:a:fence", key_prefix)  # what `locks release --force` runs
    successor = client.try_acquire("{acct}:a", 10, fenced=True)
    assert successor is not None and successor.fence == 4
    assert store.write(resource, "successor", successor.fence)
    assert not store.write(resource, "stale holder's late write", stale.fence)
    assert client.release(successor)
