"""A forked child forgets its parent's bookkeeping without disturbing the parent (found in
review): its close() makes no fair waiter of the parent's leave its queue (that leave deletes
the lock the waiter took meanwhile: the child released its parent's lock), and forgetting the
parent's cleanups does not take the book's inherited lock (held by a parent's thread at the
fork, it is held in the child for ever: the child hung inside ``os.fork()``)."""

from __future__ import annotations

import os
import threading
import time

import redis

from _forking import in_child_forked_while_held, in_forked_child
from turbolock import LockClient
from turbolock.redis_server import RedisServer


def test_a_child_s_close_spares_a_fair_lock_its_parent_took(redis_server: RedisServer, raw: redis.Redis,
                                                            core_name: str, key_prefix: str) -> None:
    holder_client = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    client = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    try:
        holder = holder_client.lock("job", ttl=30, fair=True)
        assert holder.acquire(timeout=0)
        waiter = client.lock("job", ttl=30, fair=True, timeout=10)
        got: list[bool] = []
        thread = threading.Thread(target=lambda: got.append(waiter.acquire()))
        thread.start()
        queue = ("{" + key_prefix + "job}:queue").encode()
        deadline = time.monotonic() + 5
        while raw.zcard(queue) == 0:  # the parent's waiter is in the queue when it forks
            assert time.monotonic() < deadline
            time.sleep(0.01)
        read_fd, write_fd = os.pipe()

        def child() -> str:
            os.close(write_fd)
            os.read(read_fd, 1)  # the parent's waiter has the lock now
            client.close()
            return "closed"

        def parent() -> None:
            holder.release()
            thread.join(10)
            assert got == [True]
            os.write(write_fd, b"x")

        assert in_forked_child(child, parent) == "closed"
        os.close(read_fd)
        os.close(write_fd)
        assert waiter.owned(), "the child's close() released the parent's lock"
        assert raw.exists(key_prefix + "job")
        waiter.release()
    finally:
        client.close()
        holder_client.close()


def test_a_fork_while_another_thread_is_in_the_cleanup_book(redis_server: RedisServer, core_name: str,
                                                             key_prefix: str) -> None:
    client = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    try:
        def child() -> str:
            return "held" if client.query("job").held else "free"

        # where remember(), take() and settle() are for a moment
        assert in_child_forked_while_held(client._cleanup._lock, child) == "free"
    finally:
        client.close()
