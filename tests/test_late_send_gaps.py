"""More of ``test_late_send``: the write paths that go through ``roundtrip`` (``replicas_ack``'s
SET + WAIT, a NOSCRIPT retry) and a durable bulk call's WAIT. A command that never reached the
server is not reported maybe held, no release is queued for it and the healthy connection is
kept. (Each was left with the old behaviour by the first fix: found in review.)"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from turbolock import AcquireOutcomeUnknownError, LockClient, TimeoutError
from turbolock._sync import executor as _executor_module
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import Unconfirmed
from turbolock.redis_server import RedisServer


@pytest.fixture
def acked_client(redis_server: RedisServer, core_name: str, key_prefix: str) -> Iterator[LockClient]:
    """A client that waits for one replica (``replicas_ack=1``). The server has none, which does
    not matter here: nothing below is ever sent."""
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix,
                             replicas_ack=1, replicas_timeout=0.05) as client:
        yield client


def test_replicas_ack_set_nx_past_its_deadline_is_a_timeout_and_keeps_the_connection(
        acked_client: LockClient) -> None:
    """Same check as tests/test_late_send.py, with ``replicas_ack`` (SET and WAIT in one write:
    ``roundtrip``, which never raises NotSent)."""
    client = acked_client
    assert not client.query("warm-up").held
    pool = client._exec.pool
    (conn,) = pool._idle
    try:
        client._exec.set_nx_one(b"late", b"t" * 20, 30_000, time.monotonic() - 0.001)
    except TimeoutError:
        pass
    except Unconfirmed as exc:
        pytest.fail(f"nothing was sent, yet Unconfirmed({exc.cause!r}) (maybe held)")
    assert pool._idle == [conn] and conn.sock is not None, "the healthy connection was closed"


def test_replicas_ack_late_attempt_queues_no_release_for_a_token_never_sent(
        acked_client: LockClient, raw: redis.Redis, key_prefix: str) -> None:
    """A Lock attempt whose deadline passed before the write (as a blocking acquire's last one,
    cut to what was left of the wait): with ``replicas_ack`` it is still AcquireOutcomeUnknownError
    and a background release is queued for a token the server never saw."""
    client = acked_client
    assert not client.query("warm-up").held
    try:
        client._attempt("late", 30, None, False, None, time.monotonic() - 0.001)
    except TimeoutError:
        pass
    except AcquireOutcomeUnknownError as exc:
        pytest.fail(f"nothing was sent, yet: {exc!r}; cleanup queued: {len(client._cleanup)}")
    assert raw.exists(key_prefix + "late") == 0
    assert not client._cleanup


def test_noscript_retry_past_its_deadline_is_not_maybe_held(
        client: LockClient, raw: redis.Redis, key_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fenced acquire answered NOSCRIPT (the script cache was flushed: nothing ran); the thread is
    then held up (GIL, a busy host) until the deadline has passed, so SCRIPT LOAD and the retried
    EVALSHA are never written. Nothing ran on the server, yet the caller is told the lock may be
    held, a release is queued and the connection is closed."""
    assert not client.query("warm-up").held
    pool = client._exec.pool
    (conn,) = pool._idle
    raw.script_flush()
    deadline = time.monotonic() + 0.5
    original = _executor_module._script_load

    def held_up(conn_: object, script: object) -> bytes:
        time.sleep(max(0.0, deadline - time.monotonic()) + 0.01)  # the thread was preempted here
        return original(conn_, script)  # type: ignore[arg-type]

    monkeypatch.setattr(_executor_module, "_script_load", held_up)
    outcome = "returned"
    try:
        client._exec.script_one(_scripts.FENCED_ACQUIRE, b"{late}", b"t" * 20, 30_000, deadline)
    except TimeoutError:
        outcome = "TimeoutError"
    except Unconfirmed as exc:
        outcome = f"Unconfirmed({exc.cause!r})"
    assert raw.exists(key_prefix + "{late}") == 0  # nothing ran
    assert outcome == "TimeoutError", f"nothing ran on the server, yet {outcome} (maybe held)"
    assert pool._idle == [conn] and conn.sock is not None, "the healthy connection was closed"


def test_bulk_wait_past_its_deadline_keeps_the_connection(acked_client: LockClient) -> None:
    """A durable bulk call (``replicas_ack``) whose deadline passes while the caller works on the
    last chunk's replies: a WAIT sent after them (as once) was refused unsent, and ``many``'s
    ``except Exception`` closed the healthy connection. The WAIT now goes in the last chunk's
    write; its reply, already in, is still read (``EPILOGUE_GRACE``): the connection is kept."""
    client = acked_client
    assert not client.query("warm-up").held
    pool = client._exec.pool
    (conn,) = pool._idle
    deadline = time.monotonic() + 0.5

    def encode(buf: object, start: int, stop: int) -> None:
        for i in range(start, stop):
            buf.append_set_nx_px(b"bulk%d" % i, b"t" * 20, 30_000)  # type: ignore[attr-defined]

    def on_replies(start: int, replies: list[object]) -> None:
        time.sleep(max(0.0, deadline - time.monotonic()) + 0.01)  # the caller's work outlasts the deadline

    client._exec.many(2, encode, on_replies=on_replies, deadline=deadline, durable=True)
    assert pool._idle == [conn] and conn.sock is not None, "a WAIT never sent closed the healthy connection"
