"""README "Auto-renewal": a forked child can neither renew nor release its parent's locks. A child
that drops its inherited reference to a parent's auto-renewed lease, then renews a lock of its
own, must not release the parent's lock (the parent still holds and renews it)."""

from __future__ import annotations

import gc
import time

import redis

from _forking import in_forked_child
from turbolock import LockClient
from turbolock.redis_server import RedisServer


def test_child_dropping_an_inherited_renewed_lease_does_not_release_the_parent_s_lock(
        redis_server: RedisServer, raw: redis.Redis, core_name: str, key_prefix: str) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        held = {"lease": client.try_acquire("parent-job", 2.0, auto_renew=True)}
        assert held["lease"] is not None
        key = key_prefix + "parent-job"

        def child() -> str:
            held.clear()  # the child lets go of what it inherited (a function returned, ...)
            gc.collect()
            own = client.try_acquire("child-job", 2.0, auto_renew=True)  # starts the child's renewer
            assert own is not None
            time.sleep(0.5)  # a few renewer wake-ups
            client.release(own)
            return "ok"

        assert in_forked_child(child) == "ok"
        # the parent still holds and renews its lock: nothing in the child may have deleted it
        assert raw.get(key) == held["lease"].token, "the forked child released its parent's lock"
        assert client.release(held["lease"]) is True
