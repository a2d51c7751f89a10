"""The best hand-written redis-py lock for waiters: woken by the release instead of polling.

What a careful user writes with redis-py alone when ``Lock(sleep=...)`` polls too slowly: take
the lock with ``SET NX PX``; while someone else holds it, wait on a channel that the release
script publishes to. Each waiter keeps one subscribed connection for its lifetime (no
SUBSCRIBE round trip per wait) and retries the ``SET`` after every message or after at most
``POLL`` seconds, so a message sent before it subscribed, a lost one or a holder that crashed
costs at most one poll interval.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis

POLL = 0.010
"""The longest a waiter sleeps between two tries when no release wakes it."""

RELEASE = """\
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], '')
  return 1
end
return 0
"""


class PubSubLock:
    """``acquire()`` / ``release()`` like redis-py's ``Lock``, for one worker thread."""

    def __init__(self, client: redis.Redis, name: str, ttl: float, timeout: float) -> None:
        self._client = client
        self._name = name
        self._channel = name + ":released"
        self._ttl_ms = int(ttl * 1000)
        self._timeout = timeout
        self._release = client.register_script(RELEASE)
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(self._channel)
        self._token = b""

    def acquire(self) -> bool:
        token = os.urandom(16)
        deadline = time.monotonic() + self._timeout
        take = self._client.set
        while True:
            if take(self._name, token, nx=True, px=self._ttl_ms):
                self._token = token
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._pubsub.get_message(timeout=min(POLL, left))

    def release(self) -> bool:
        released: Any = self._release(keys=[self._name, self._channel], args=[self._token])
        return bool(released)

    def close(self) -> None:
        self._pubsub.close()
