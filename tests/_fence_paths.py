"""One name's fences drawn through every fenced path of a client, in turn: ``try_acquire``, a
bulk acquire (the name among ``bulk_with``), a claim, a Lock object and a fair Lock, each
released before the next (shared by the one-server, Sentinel and Cluster tests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def fences_by_every_path(client: Any, name: str, bulk_with: Sequence[str] = (), rounds: int = 2) -> list[int]:
    """The fences each path got, in the order drawn."""
    seen: list[int] = []
    for _ in range(rounds):
        lease = client.try_acquire(name, 10, fenced=True)
        seen.append(lease.fence)
        assert client.release(lease)
        bulk = client.acquire_many([name, *bulk_with], 10, fenced=True)
        assert bulk.all_acquired
        seen.append(bulk.leases[0].fence)
        assert all(client.release_many(bulk.acquired))
        claim = client.acquire_many([name], 10, limit=1, fenced=True)
        seen.append(claim.acquired[0].fence)
        assert all(client.release_many(claim.acquired))
        for fair in (False, True):
            lock = client.lock(name, 10, fenced=True, fair=fair)
            assert lock.acquire()
            seen.append(lock.fence)
            lock.release()
    return seen
