"""What is left when close() is cut short or overtaken (found in review of close's order: it
ends every wait first, then releases what it renewed, which on a server that stopped answering
takes its whole deadline):

- a waiter whose attempt was in flight as close() began made the client's subscriber (it had
  none) after close's last look at it: that connection outlived close (threads: 30 s, until its
  idle close; asyncio: for the life of the loop);
- a process forked while its parent was closing the client found every blocking acquire refused
  (the parent's "closing" came with the fork) while the client said it was open;
- a threaded close() interrupted by Ctrl-C left the client half closed: open, yet every blocking
  acquire refused. It is closed all the same now, at once, as an asyncio close() cancelled
  part-way is."""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts, close_only
from _forking import in_forked_child
from turbolock import ClientClosedError, LockClient
from turbolock.redis_server import RedisServer


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _addresses(raw: redis.Redis) -> set[str]:
    return {client["addr"] for client in raw.client_list()}


@pytest.mark.parametrize("front", FRONTS)
def test_no_subscriber_made_by_a_waiter_outlives_close(own_server: RedisServer, core_name: str,
                                                       key_prefix: str, front: str) -> None:
    fronts = Fronts.at(front, own_server.url, core=core_name, key_prefix=key_prefix, timeout=3.0)
    raw = redis.Redis(port=own_server.port)
    try:
        holder = fronts.make()
        assert holder.try_acquire("held", 60) is not None
        client = fronts.make()
        target = getattr(client, "_target", client)
        client.query("warm")  # a pooled connection: the attempt below is written at once
        before = _addresses(raw)
        outcome: list[Any] = []

        def wait() -> None:
            try:
                outcome.append(client.lock("held", 30).acquire(timeout=20))
            except BaseException as exc:
                outcome.append(exc)

        own_server.pause()
        try:
            waiter = threading.Thread(target=wait, daemon=True)
            waiter.start()
            time.sleep(0.3)  # its first attempt is written; the reply waits for the server
            assert target._waker_instance is None
            closer = threading.Thread(target=close_only, args=(client,), daemon=True)
            closer.start()
            time.sleep(0.5)  # close() waits for its connections' calls: the attempt's reply
        finally:
            own_server.resume()
        closer.join(10)
        waiter.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], ClientClosedError), outcome
        time.sleep(0.3)
        left = _addresses(raw) - before
        assert target._waker_instance is None and not left, (
            f"after close(): a subscriber made by its waiter ({target._waker_instance!r}), "
            f"connections still open {sorted(left)}")
    finally:
        fronts.close()
        raw.close()


def test_a_child_forked_during_close_can_still_wait_for_a_lock(own_server: RedisServer, core_name: str,
                                                               key_prefix: str) -> None:
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=3.0)
    try:
        assert client.try_acquire("renewed", 30, auto_renew=True) is not None
        own_server.pause()
        closer = threading.Thread(target=client.close, daemon=True)
        try:
            closer.start()
            time.sleep(0.3)  # close() is releasing the renewed lock; the server does not answer

            def work() -> str:
                time.sleep(0.5)  # the parent resumes the server meanwhile
                tried = client.try_acquire("tried", 10) is not None
                try:
                    got: object = client.lock("waited", 10).acquire(timeout=2)
                except Exception as exc:
                    got = f"{type(exc).__name__}: {exc}"
                return f"closed={client.closed} try_acquire={tried} blocking_acquire={got!r}"

            reported = in_forked_child(work, own_server.resume)
        finally:
            own_server.resume()
        closer.join(10)
        assert reported == "closed=False try_acquire=True blocking_acquire=True", reported
    finally:
        client.close()


def test_an_interrupted_close_closes_the_client_at_once(own_server: RedisServer, core_name: str,
                                                         key_prefix: str) -> None:
    raw = redis.Redis(port=own_server.port)
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=5.0)
    try:
        before = _addresses(raw)
        assert client.try_acquire("renewed", 30, auto_renew=True) is not None
        own_server.pause()  # close's release of the renewed lock waits for the server
        # Ctrl-C as SIGALRM's handler raises it (a pytest-xdist worker ignores SIGINT itself).
        previous = signal.signal(signal.SIGALRM, _interrupt)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            started = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                client.close()
            took = time.monotonic() - started
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            own_server.resume()
        assert took < 1.5, f"the interrupted close() took {took:.2f}s"
        assert client.closed
        with pytest.raises(ClientClosedError):
            client.try_acquire("after", 10)
        with pytest.raises(ClientClosedError):
            client.lock("after", 10).acquire(timeout=1)
        assert not [t for t in threading.enumerate() if t.name == "turbolock-renewer" and t.is_alive()]
        time.sleep(0.3)
        assert _addresses(raw) - before == set(), "a connection of the closed client is still open"
    finally:
        client.close()
        raw.close()
