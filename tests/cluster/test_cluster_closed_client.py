"""A closed ClusterLockClient (both fronts): a blocking acquire stops at once with
``ClientClosedError``, as on the single-server client (tests/test_closed_client.py), and no call
takes a lock: close() emptied the masters' pools and the next call made new ones, so a closed
client still took locks nobody would renew or release (found by review)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from _blocking_async import close_only
from turbolock import ClientClosedError


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_blocking_acquire_on_a_closed_cluster_client_fails_at_once(make_client: Callable[..., Any],
                                                                     fair: bool) -> None:
    client = make_client()
    assert client.query("free").held is False
    close_only(client)
    started = time.monotonic()
    try:
        result: object = client.lock("free", 5, fair=fair).acquire(timeout=2.0)
    except BaseException as exc:
        result = exc
    took = time.monotonic() - started
    assert took < 0.5 and isinstance(result, ClientClosedError), (result, took)


def test_a_closed_cluster_client_takes_no_lock(make_client: Callable[..., Any]) -> None:
    client = make_client()
    assert client.query("free").held is False
    close_only(client)
    try:
        result: object = client.try_acquire("taken-after-close", 30)
    except BaseException as exc:
        result = exc
    assert isinstance(result, ClientClosedError), (
        f"try_acquire on a closed ClusterLockClient gave {result!r}: a lock no renewer or cleanup of "
        f"this closed client will ever release")
