"""A process forked while its parent closes a client: the parent's close is the parent's, the
child's client is open and whole (tests/test_close_part_way.py,
tests/cluster/test_cluster_fork_during_close.py). It was half stopped: its auto-renewed acquires
(every ``client.lock(name)`` with no ttl) raised ClientClosedError, leaving the lock held by
nobody, and its background cleaner never started; a Redlock client was closed outright. Found in
review."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

import pytest
import redis

from _forking import in_forked_child
from turbolock import AcquireOutcomeUnknownError, LockClient
from turbolock.redis_server import RedisServer
from turbolock.redlock import RedlockClient

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the same at-fork code on both


def _attempt(call: Callable[[], object]) -> str:
    try:
        return "ok" if call() is not None else "None"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def test_a_child_forked_during_close_can_take_an_auto_renewed_lock(own_server: RedisServer, core_name: str,
                                                                   key_prefix: str) -> None:
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=3.0)
    try:
        assert client.try_acquire("renewed", 30, auto_renew=True) is not None
        own_server.pause()  # close() waits on its release of the renewed lock
        closer = threading.Thread(target=client.close, daemon=True)
        try:
            closer.start()
            time.sleep(0.3)

            def work() -> str:
                time.sleep(0.5)  # the parent resumes the server meanwhile
                plain = _attempt(lambda: client.try_acquire("plain", 10))
                renewed = _attempt(lambda: client.try_acquire("child-renewed", 10, auto_renew=True))
                return f"closed={client.closed} plain={plain} auto_renew={renewed}"

            reported = in_forked_child(work, own_server.resume)
        finally:
            own_server.resume()
        closer.join(10)
        assert reported == "closed=False plain=ok auto_renew=ok", reported
    finally:
        client.close()


def test_a_child_forked_during_a_redlock_close_has_an_open_client(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str) -> None:
    servers = own_masters(3)
    client = RedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                           node_timeout=2.0)
    try:
        assert client.try_acquire("renewed", 30, auto_renew=True) is not None
        for server in servers:
            server.pause()  # close() waits on its release of the renewed lock
        closer = threading.Thread(target=client.close, daemon=True)
        try:
            closer.start()
            time.sleep(0.3)

            def work() -> str:
                time.sleep(0.5)  # the parent resumes the servers meanwhile
                plain = _attempt(lambda: client.try_acquire("plain", 10))
                return f"plain={plain}"

            def resume() -> None:
                for server in servers:
                    server.resume()

            reported = in_forked_child(work, resume)
        finally:
            for server in servers:
                server.resume()
        closer.join(10)
        assert reported == "plain=ok", reported
    finally:
        client.close()


def test_a_child_forked_during_close_releases_its_own_maybe_held_locks(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    """The same gap in the background cleaner: close() stops it (``BackgroundCleaner._stopping``)
    before its last cleanup, and ``BackgroundCleaner.forget_after_fork`` keeps that flag. A child
    forked then has an open client whose cleaner never starts: a lock its timed-out acquire may
    have taken stays held for its whole ttl (here 30 s) instead of being released in the
    background once the server answers again."""
    raw = redis.Redis(port=own_server.port)
    pid = own_server.process.pid  # (Popen.send_signal does nothing in a forked child: os.kill there)
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=2.0)
    try:
        client.query("warm")  # a connection made: the next command is sent, its reply lost
        own_server.pause()
        try:
            client.try_acquire("parent-maybe", 30)  # outcome unknown: maybe held, owed a release
        except AcquireOutcomeUnknownError:
            pass
        # close() stops the cleaner, and waits for its release in flight on the paused server
        closer = threading.Thread(target=client.close, daemon=True)
        closer.start()
        time.sleep(0.3)

        def work() -> str:
            os.kill(pid, signal.SIGCONT)
            client.query("warm")  # the child's own connection
            os.kill(pid, signal.SIGSTOP)
            outcome = _attempt(lambda: client.try_acquire("child-maybe", 30))  # maybe held
            os.kill(pid, signal.SIGCONT)
            time.sleep(2.0)  # the background release has had time to go out
            left = raw.exists(key_prefix + "child-maybe")
            return f"closed={client.closed} acquire={outcome.split(':')[0]} still_held={bool(left)}"

        try:
            reported = in_forked_child(work, limit=20)
        finally:
            own_server.resume()
        closer.join(10)
        assert reported == "closed=False acquire=AcquireOutcomeUnknownError still_held=False", reported
    finally:
        own_server.resume()
        client.close()
        raw.close()
