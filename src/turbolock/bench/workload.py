"""What every contender is asked to do: the same key names, token size, ttl and batch sizes."""

from __future__ import annotations

from dataclasses import dataclass

KEY_PREFIX = "bench:"
TTL_MS = 60_000
TTL_SECONDS = TTL_MS / 1000
TOKEN_BYTES = 16
CHUNK_SIZE = 1000
"""Commands per pipelined chunk, for turbolock and redis-py alike (and keys per multi-key script
call where a contender batches: eight such calls go in one write)."""


def names(kind: str, count: int) -> list[str]:
    """``kind:000000000042``: 12 digits, the shape of redis-benchmark's ``__rand_int__``."""
    return [f"{kind}:{i:012d}" for i in range(count)]


@dataclass(frozen=True)
class Workload:
    pairs: int
    """Sequential acquire+release pairs per measurement."""
    bulk: int
    """Distinct locks per bulk acquire (and then bulk release)."""
    repeats: int
    round_trips: int
    """Requests for each ``redis-benchmark -P 1`` run."""

    def pair_names(self) -> list[str]:
        return names("pair", self.pairs)

    def bulk_names(self) -> list[str]:
        return names("bulk", self.bulk)


DEFAULT = Workload(pairs=5000, bulk=100_000, repeats=7, round_trips=10_000)
QUICK = Workload(pairs=1000, bulk=20_000, repeats=3, round_trips=5000)
