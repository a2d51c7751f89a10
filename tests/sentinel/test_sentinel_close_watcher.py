"""close() while the threaded client's watcher is asking a stopped Sentinel: once that Sentinel
fails the question (here it dies), the watcher would go on to the next one, and the table of
Sentinel connections, emptied by close(), opened a new one there that stayed open as long as
the client object lived. After close() no Sentinel connection is opened. Found in review."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient


def _connections_to(port: int) -> int:
    """This process's established TCP connections to ``port`` on the loopback (from /proc)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            next(rows)
            for row in rows:
                fields = row.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if remote_port == port and fields[3] == "01" and fields[9] in inodes:
                    count += 1
    return count


def test_close_leaves_no_sentinel_connection_while_the_watcher_was_asking(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str) -> None:
    group = own_sentinel_group(replicas=0, sentinels=3, down_after=60000)
    first, second = group.sentinels[0], group.sentinels[1]
    client = SentinelLockClient(group.sentinel_urls, group.service, timeout=3.0, core=core_name,
                                key_prefix=key_prefix)
    assert client.try_acquire("leak", ttl=5) is not None  # the watcher runs; the first Sentinel answered
    assert _connections_to(second.port) == 0
    first.pause()
    time.sleep(1.5)  # the watcher woke (every second) and waits on the stopped Sentinel
    client.close()
    first.process.kill()  # that question fails: the watcher would ask the next Sentinel
    time.sleep(1.0)
    assert _connections_to(second.port) == 0, "close() left a connection to a Sentinel open"
