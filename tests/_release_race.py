"""A release answered while the renewal round that renewed the same lock is still being settled,
made deterministic with ``on_lost`` callbacks, which run on the renewer thread: ``first`` is
stolen and found lost alone in an early round, its callback holding the renewer until
``second`` and ``victim`` are both overdue, so the next round takes them together; ``second``
is stolen too, and its callback, run before the round's answer for ``victim`` (renewed on the
server) is settled, waits until the test has released ``victim``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from turbolock import LockLostError


def release_while_settling(client: Any, steal: Callable[[str], None], same_batch: bool) -> Any:
    """The released ``victim``, once the renewer has settled its round. ``same_batch``: the
    victim goes in the stolen one's batch, due first (a front end settling a batch lease by
    lease, Redlock); else in a batch of its own, due after it (batch by batch)."""
    released = threading.Event()
    in_callback = threading.Event()
    start = time.monotonic()

    def hold_renewer(lease: object) -> None:
        time.sleep(max(0.0, start + 0.95 - time.monotonic()))  # the next two are both overdue then

    def wait_for_release(lease: object) -> None:
        in_callback.set()
        released.wait(5)

    first = client.try_acquire("first", 0.6, auto_renew=True, on_lost=hold_renewer)  # due at 0.4 s
    if same_batch:
        victim = client.try_acquire("victim", 1.2, auto_renew=True)
        second = client.try_acquire("second", 1.2, auto_renew=True, on_lost=wait_for_release)
    else:
        second = client.try_acquire("second", 1.2, auto_renew=True, on_lost=wait_for_release)  # due at 0.8 s
        victim = client.try_acquire("victim", 1.25, auto_renew=True)  # due at 0.83 s
    assert first is not None and second is not None and victim is not None
    steal("first")
    steal("second")
    assert in_callback.wait(5), "the stolen lock was never reported lost"
    assert client.release(victim) is True
    with pytest.raises(LockLostError, match="released"):
        victim.ensure_held()
    released.set()
    time.sleep(0.2)  # the renewer settles the victim
    return victim


def assert_stays_released(victim: Any) -> None:
    """What a release promises: no time left, ``ensure_held()`` raises (a settled renewal wrote
    a fresh expiry over it, found in review)."""
    assert victim.valid_for() == 0.0
    with pytest.raises(LockLostError, match="released"):
        victim.ensure_held()
