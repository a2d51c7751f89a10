"""The subscriber's keepalive PING on a connection with no subscription left (every key waited
for was unsubscribed after IDLE_SECONDS) is answered ``+PONG`` (a plain reply, not the pub/sub
``["pong", ""]``). The wake book took it for a refusal to subscribe: from then on no waiter of
the client was woken again (they only polled), with a false warning in the log (found in review).

PING_AFTER is shortened from 15 s to 0.5 s to keep the test short; with the defaults the same
happened 16 s after the last waiter left (the threaded subscriber stays up for 30 s, the asyncio
one until the client closes)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from _eventually import eventually
from _waking import acquire_in_thread
from turbolock._flows import keepalive

pytestmark = pytest.mark.timing


def test_an_idle_subscriber_keepalive_is_not_taken_for_a_refusal(
        make_client: Callable[..., Any], key_prefix: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(keepalive, "PING_AFTER", 0.5)
    client = make_client()
    key = (key_prefix + "idle").encode()
    # One waiter, woken by a release: the key is subscribed, then idle once it has the lock.
    held = client.try_acquire("idle", 30)
    assert held is not None
    waiter = client.lock("idle", 30)
    thread, done = acquire_in_thread(waiter, 10)
    assert eventually(lambda: client._waker().book.subscribed(key), 5)
    assert client.release(held)
    thread.join(10)
    assert done
    waiter.release()
    # Unsubscribed after IDLE_SECONDS (1 s), then quiet: the keepalive PING goes out.
    with caplog.at_level(logging.WARNING, logger="turbolock"):
        time.sleep(2.5)
    assert client._waker().book.refusal is None, client._waker().book.refusal
    assert not [r for r in caplog.records if "refused to subscribe" in r.getMessage()]
    # And the next waiter is subscribed (woken by releases) again.
    held = client.try_acquire("idle", 30)
    assert held is not None
    thread, done = acquire_in_thread(client.lock("idle", 30), 10)
    assert eventually(lambda: client._waker().book.subscribed(key), 3)
    assert client.release(held)
    thread.join(10)
