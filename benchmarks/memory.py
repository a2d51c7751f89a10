"""Memory a held lease costs the client: what an ``acquire_many`` result keeps alive, per lease."""

from __future__ import annotations

import gc
import tracemalloc

from turbolock import LockClient
from turbolock.bench.workload import CHUNK_SIZE, KEY_PREFIX, TTL_SECONDS, names


def bytes_per_lease(url: str, core: str, lock_names: list[str]) -> tuple[float, float]:
    """(retained, peak) bytes per lease, traced around one ``acquire_many`` of ``lock_names``.

    Retained is what the result holds (leases, their keys and tokens, the result's lists);
    peak adds what the call needed on the way (encoded chunks, reply lists).
    """
    with LockClient.from_url(url, core=core, key_prefix=KEY_PREFIX, chunk_size=CHUNK_SIZE,
                             max_connections=1) as client:
        warm = client.acquire_many(names("warm", 10), TTL_SECONDS)  # connection open, buffers grown
        client.release_many(warm.acquired)
        gc.collect()
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            result = client.acquire_many(lock_names, TTL_SECONDS)
            gc.collect()
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        held = len(result.acquired)
        client.release_many(result.acquired)
    if held != len(lock_names):
        raise RuntimeError(f"only {held} of {len(lock_names)} locks were taken")
    return (after - before) / held, (peak - before) / held
