"""Renewing locks already held: turbolock's ``extend_many`` and the strongest redis-py shape.

``hold`` takes the locks untimed; each contender then renews every one of them once and checks
every answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from turbolock import Lease, LockClient
from turbolock._flows.renewal_book import COMMANDS_PER_WRITE, RENEW_CHUNK
from turbolock._wire import scripts as _scripts

from .contenders import BenchmarkError, Timing, per_key, redis_py, timed
from .workload import CHUNK_SIZE, KEY_PREFIX, TTL_MS, TTL_SECONDS


class HeldLocks(NamedTuple):
    keys: list[str]
    """Full Redis keys (``KEY_PREFIX + name``), as redis-py names them."""
    tokens: list[bytes]
    leases: list[Lease]


def hold(client: LockClient, names: Sequence[str], ttl: float = TTL_SECONDS) -> HeldLocks:
    """Take every name (untimed set-up); the keys and tokens redis-py then renews."""
    leases = client.acquire_many(names, ttl).acquired
    if len(leases) != len(names):
        raise BenchmarkError(f"set-up: {len(names) - len(leases)} of {len(names)} locks not taken")
    prefix = client.key_prefix.decode()
    keys = [prefix + str(lease.name) for lease in leases]
    return HeldLocks(keys, [lease.token for lease in leases], leases)


def check_all_renewed(label: str, replies: Sequence[Any], count: int) -> None:
    renewed = sum(1 for reply in replies if reply == 1)
    if renewed != count:
        raise BenchmarkError(f"{label}: {count - renewed} of {count} renewals refused")


class RedisPyPipelinedRenewMany:
    """The strongest redis-py shape we know: turbolock's RENEW_MANY script per ``RENEW_CHUNK``
    keys, ``COMMANDS_PER_WRITE`` of them per pipelined ``execute()``."""

    def __init__(self, url: str, hiredis: bool | None = None) -> None:
        self.redis = redis_py(url, hiredis)
        self.sha = self.redis.script_load(_scripts.RENEW_MANY.source)

    def renew(self, held: HeldLocks) -> Timing:
        sha = self.sha
        keys, tokens = held.keys, held.tokens
        per_write = RENEW_CHUNK * COMMANDS_PER_WRITE

        def run() -> list[Any]:
            pipe = self.redis.pipeline(transaction=False)
            replies: list[Any] = []
            for write in range(0, len(keys), per_write):
                for start in range(write, min(len(keys), write + per_write), RENEW_CHUNK):
                    stop = start + RENEW_CHUNK
                    chunk = keys[start:stop]
                    pipe.evalsha(sha, len(chunk), *chunk, TTL_MS, *tokens[start:stop])
                replies.extend(pipe.execute())
            return per_key(replies, len(keys), RENEW_CHUNK)

        replies, wall, cpu = timed(run)
        check_all_renewed("redis-py pipelined renew_many", replies, len(keys))
        return Timing(len(keys), wall, cpu)

    def close(self) -> None:
        self.redis.close()


class TurbolockExtendMany:
    """``LockClient.extend_many`` of every held lease, on one core."""

    def __init__(self, url: str, core: str) -> None:
        self.client = LockClient.from_url(url, core=core, key_prefix=KEY_PREFIX, chunk_size=CHUNK_SIZE,
                                          max_connections=1)

    def renew(self, held: HeldLocks) -> Timing:
        replies, wall, cpu = timed(self.client.extend_many, held.leases, TTL_SECONDS)
        check_all_renewed("turbolock extend_many", [1 if ok else 0 for ok in replies], len(held.leases))
        return Timing(len(held.leases), wall, cpu)

    def close(self) -> None:
        self.client.close()
