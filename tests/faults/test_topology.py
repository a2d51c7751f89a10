"""What the harness reads from the lock servers itself: the keys left behind (a fence counter,
which never expires by design, is not one)."""

from __future__ import annotations

from ._topology import Topology


def test_keys_left_finds_lock_keys_and_skips_fence_counters() -> None:
    with Topology() as topology:
        raw = topology.raw()
        raw.set("f-x:short", "token", px=60_000)
        raw.set("{f-x:short}:fence", 7)
        raw.set("other:short", "token")
        left = topology.keys_left("f-x:")
        raw.close()
    assert left == [f"{topology.servers[0].port}:f-x:short"]
