"""Worker processes of the cluster contention test (module level, so a spawned process can import them)."""

from __future__ import annotations

import time
from typing import Any

import redis

from turbolock.cluster import ClusterLockClient
from turbolock.errors import LockError


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


def reshard_contender(index: int, url: str, core: str, key_prefix: str, held: list[str], start: Any,
                      done: Any) -> dict[str, Any]:
    """Until ``done``: bulk acquire and release names of its own (each round must get all of
    them), and try to take slices of ``held`` (another client's locks: it must get none)."""
    start.wait(30)
    got_held: list[str] = []
    rounds = short_rounds = 0
    errors: list[str] = []
    mine = [f"churn:{index}:{i}" for i in range(500)]
    with ClusterLockClient.from_url(url, core=core, key_prefix=key_prefix, timeout=2.0) as client:
        deadline = time.monotonic() + 40
        while not done.is_set() and time.monotonic() < deadline:
            try:
                result = client.acquire_many(mine, 10)
                short_rounds += len(result.acquired) != len(mine)
                client.release_many(result.acquired)
                offset = (rounds * 250) % len(held)
                taken = client.acquire_many(held[offset:offset + 250], 10).acquired
                got_held += [str(lease.name) for lease in taken]
                client.release_many(taken)
            except LockError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            rounds += 1
    return {"got_held": got_held, "rounds": rounds, "short_rounds": short_rounds, "errors": errors}


def claim_contender(index: int, url: str, core: str, key_prefix: str, names: list[str], k: int,
                    start: Any) -> dict[str, Any]:
    """Claim ``k`` of ``names`` at the same moment as the others; report which it got."""
    start.wait(30)
    with ClusterLockClient.from_url(url, core=core, key_prefix=key_prefix) as client:
        result = client.acquire_many(names, 30, limit=k)
        got = [str(lease.name) for lease in result.acquired]
        return {"got": got, "implementation": client.implementation}
