"""A Lock object given a token counts an attempt as not acquired while the release this client
owes with that token is on its way (``owed_release_flow``). A forked child forgets the parent's
cleanups (``CleanupBook.clear()``), those on their way too: a release the parent's cleaner had
on its way when the process forked was "on its way" in the child for ever (nothing there settles
it), and a Lock object with that token could never acquire in the child (found by review)."""

from __future__ import annotations

import os
import time

import redis

from _forking import in_forked_child
from turbolock import AcquireOutcomeUnknownError, LockClient
from turbolock.redis_server import RedisServer


def test_a_forked_child_is_not_held_back_by_the_parents_release_in_flight(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    token = os.urandom(16)
    raw = redis.Redis(port=own_server.port)
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=3.0)
    try:
        assert client.query("warm").held is False
        own_server.pause()
        try:
            try:
                client.try_acquire("job", 20, token=token)
            except AcquireOutcomeUnknownError:
                pass  # the reply was lost: a release with the token is owed
            deadline = time.monotonic() + 5
            while not client._cleanup._in_flight and time.monotonic() < deadline:
                time.sleep(0.01)
            assert client._cleanup._in_flight, "the cleaner never took the owed release"

            def child() -> str:
                lock = client.lock("job", 20, token=token, timeout=6)
                started = time.monotonic()
                got = lock.acquire()
                held = raw.get(key_prefix + "job")
                return (f"got={got} after {time.monotonic() - started:.1f}s, key={held!r}, "
                        f"in_flight={dict(client._cleanup._in_flight)!r}")

            def meanwhile() -> None:
                time.sleep(0.3)
                own_server.resume()  # the parent's cleaner releases the lost attempt's lock

            report = in_forked_child(child, meanwhile, limit=30)
        finally:
            own_server.resume()
        assert report.startswith("got=True"), (
            f"in the child, the Lock given the token never acquired the free lock: {report}")
    finally:
        client.close()
        raw.close()
