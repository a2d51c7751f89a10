"""A forked child and what it inherits (found in review):

- module-wide locks another thread of the parent held at the fork (a lease's belief lock, which
  the renewer takes every round; the lock every asyncio Lock object shares) were held in the
  child for ever: its own Lock hung in release, or in extend, past every deadline (the cleanup
  book's lock had the same bug: test_fork_parent_bookkeeping);
- the same with a threaded Lock object's state lock, then each object's own;
- the parent's held Lock passed ``ensure_held()`` in the child and ``valid_for()`` gave the
  parent's time left, while the README says a child can neither renew nor release its parent's
  locks: the child acted on what the lock protects beside the parent, two holders."""

from __future__ import annotations

import asyncio

from _forking import in_child_forked_while_held, in_forked_child
from turbolock import LockClient, LockLostError, LockNotOwnedError
from turbolock import lease as lease_module
from turbolock._flows.lock_flows import LockFlows
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


def test_a_fork_while_a_renewal_settles_beliefs_leaves_the_child_usable(redis_server: RedisServer,
                                                                       core_name: str,
                                                                       key_prefix: str) -> None:
    def child() -> str:
        with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix,
                                 timeout=1) as client:
            with client.lock("job", ttl=5, timeout=2):
                pass
        return "released"

    # where a renewal round's commands_sent/commands_ran are for a moment
    assert in_child_forked_while_held(lease_module._belief_lock, child) == "released"


def test_a_fork_while_another_thread_extends_an_async_lock_leaves_the_child_usable(
        redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    """The same with the lock every asyncio Lock object shares (``LockFlows._state_lock``, taken
    by an extend that finds its lock gone, and by every Redlock Lock's acquire, from any thread
    running an event loop): held by another thread at the fork, the child's own AsyncLock.extend()
    of a lock that expired hangs for ever instead of raising LockNotOwnedError."""
    def child() -> str:
        async def main() -> str:
            async with AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix,
                                                timeout=1) as client:
                lock = client.lock("job", ttl=0.05, timeout=2)
                assert await lock.acquire()
                await asyncio.sleep(0.2)  # expired: the extend finds it gone
                try:
                    await lock.extend(10)
                except LockNotOwnedError:
                    return "not owned"
            return "extended"

        return asyncio.run(main())

    # where another loop's AsyncLock.extend() is for a moment
    assert in_child_forked_while_held(LockFlows._state_lock, child) == "not owned"


def test_a_fork_while_another_thread_steps_a_shared_lock_object_leaves_it_usable_in_the_child(
        redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    """Threads may share a threaded Lock object; each of its steps holds a state lock. That lock
    was the object's own, not replaced at a fork: held by another parent thread then, the child's
    acquire() on that (unheld) object hung for ever, past its timeout (found in review)."""
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix, timeout=1) as client:
        shared = client.lock("job", ttl=5, timeout=1)

        def child() -> str:
            if shared.acquire(timeout=1):
                shared.release()
                return "acquired"
            return "not acquired"

        # where another thread's shared._acquire_start/_acquired/_release_start is for a moment
        assert in_child_forked_while_held(shared._state_lock, child, limit=8.0) == "acquired"


def test_a_forked_child_cannot_pass_ensure_held_on_its_parent_s_lock(redis_server: RedisServer,
                                                                     core_name: str, key_prefix: str) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        with client.lock("job", ttl=30) as lock:
            def child() -> str:
                results = []
                try:
                    lock.ensure_held()
                    results.append("lock.ensure_held passed")
                except LockLostError:
                    pass
                assert lock.lease is not None
                try:
                    lock.lease.ensure_held()
                    results.append("lease.ensure_held passed")
                except LockLostError:
                    pass
                if lock.valid_for() > 0:
                    results.append(f"valid_for {lock.valid_for():.1f}")
                return "; ".join(results) or "refused"

            assert in_forked_child(child) == "refused"
            assert lock.owned()  # the parent still holds it
