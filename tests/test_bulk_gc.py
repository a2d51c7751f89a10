"""Leases of a bulk acquire and the cycle collector.

On the C core, the leases of a bulk acquire that nothing renews are not tracked by the collector
(it would walk each one again and again: a third of the client's CPU per lock). Auto-renewed
ones stay tracked: their renewal's ``on_lost`` reaches user code, which may reach them back, and
a cycle through an untracked object is never collected. The control untracks such a cycle and
shows it leaking.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from turbolock import AutoRenew, LockClient
from turbolock._wire import core as _core


def test_plain_bulk_leases_are_untracked_on_the_c_core(client: LockClient, core_name: str) -> None:
    result = client.acquire_many([f"plain:{i}" for i in range(2500)], 30)
    leases = result.acquired
    assert len(leases) == 2500
    tracked = sum(gc.is_tracked(lease) for lease in leases)
    assert tracked == (0 if core_name == "c" else 2500)
    assert client.release_many(leases) == [True] * 2500  # they work as any lease does


def test_fenced_bulk_leases_are_untracked_on_the_c_core(client: LockClient, core_name: str) -> None:
    leases = client.acquire_many([f"fenced:{i}" for i in range(1500)], 30, fenced=True).acquired
    assert [lease.fence for lease in leases] == list(range(leases[0].fence, leases[0].fence + 1500))
    assert sum(gc.is_tracked(lease) for lease in leases) == (0 if core_name == "c" else 1500)
    assert all(client.release_many(leases))


def test_auto_renewed_bulk_leases_stay_tracked(client: LockClient) -> None:
    leases = client.acquire_many([f"renewed:{i}" for i in range(1500)], 30, auto_renew=True).acquired
    assert all(gc.is_tracked(lease) for lease in leases)
    assert all(client.release_many(leases))


class _Box:
    """What an ``on_lost`` callback may keep: here, the very result whose leases it watches."""

    result: Any = None

    def note(self, lease: Any) -> None:
        pass


@pytest.mark.parametrize("control", [False, True], ids=["tracked", "control"])
def test_a_cycle_through_an_auto_renewed_lease_is_collected(client: LockClient, core_name: str,
                                                            control: bool) -> None:
    # lease -> its renewal -> on_lost -> the box -> the result -> the lease: once released and
    # dropped, only the cycle collector can free it, and only if it sees every member.
    if control and core_name != "c":
        pytest.skip("only the compiled core can untrack")
    box = _Box()
    result = client.acquire_many(["cycle:a", "cycle:b"], 30, auto_renew=AutoRenew(), on_lost=box.note)
    box.result = result
    assert all(client.release_many(result.acquired))
    watched = weakref.ref(result.acquired[0])
    if control:  # the fault the renewal rule prevents: an untracked lease inside the cycle
        assert _core.core_c is not None
        _core.core_c.untrack(result.leases, 0, len(result.leases))
    del result, box
    gc.collect()
    if control:
        assert watched() is not None, "the control must leak the cycle"
    else:
        assert watched() is None


class _Name(str):
    """A str subclass (an enum.StrEnum member is one): it has a __dict__."""


@pytest.mark.parametrize("via", ["name", "lost_event"])
def test_a_cycle_user_code_closes_through_a_plain_bulk_lease_is_collected(client: LockClient,
                                                                           via: str) -> None:
    # lease -> its name (a str subclass) or its lost event -> the lease: such leases stay (or
    # become again) tracked, so the collector frees the cycle on both cores.
    names = [_Name(f"cyc:{i}") for i in range(3)] if via == "name" else [f"cyc:{i}" for i in range(3)]
    result = client.acquire_many(names, 30)
    lease = result.acquired[0]
    if via == "name":
        lease.name.lease = lease  # type: ignore[union-attr]
    else:
        lease.lost.lease = lease  # type: ignore[attr-defined]
    assert all(client.release_many(result.acquired))
    watched = weakref.ref(lease)
    del result, lease, names
    gc.collect()
    assert watched() is None
