"""Worker processes of the cluster contention test (module level, so a spawned process can import them)."""

from __future__ import annotations

from typing import Any

import redis

from turbolock.cluster import ClusterLockClient


def bulk_contender(index: int, url: str, core: str, key_prefix: str, names: list[str], start: Any,
                   unsafe: bool) -> dict[str, Any]:
    """Take as many of ``names`` as it can, all workers at once; report which it got.

    ``unsafe`` is the negative control: a plain ``SET`` without NX through redis-py's cluster
    client "takes" every name, as a lock without mutual exclusion would."""
    start.wait(30)
    if unsafe:
        raw = redis.RedisCluster.from_url(url)
        try:
            for name in names:
                raw.set(key_prefix + name, f"w{index}", px=30000)
        finally:
            raw.close()
        return {"index": index, "got": list(names), "implementation": core}
    with ClusterLockClient.from_url(url, core=core, key_prefix=key_prefix) as client:
        got: list[str] = []
        for offset in range(0, len(names), 250):  # several calls, interleaving with the others
            result = client.acquire_many(names[offset:offset + 250], 30)
            got += [str(lease.name) for lease in result.acquired]
        return {"index": index, "got": got, "implementation": client.implementation}
