"""A blocking bulk acquire interrupted (KeyboardInterrupt) mid-batch leaves no lock behind.

The interrupt lands at three places: between two chunks (one chunk in flight, its replies never
read), while a chunk's replies are being made into leases, and between two writes of a fenced
acquire's transactions. Whatever the chunks took is released in the background
with its tokens. Each test's control turns that hand-over off and must find locks left behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _eventually import eventually
from _interrupts import acquire_interrupted_in_wait
from turbolock import LockClient
from turbolock._flows.bulk_plan import AcquirePlan
from turbolock._flows.cleanup_book import RECHECK_AFTER
from turbolock.redis_server import RedisServer

CHUNK = 1000


def _locks_left(raw: redis.Redis, prefix: str) -> int:
    return sum(1 for key in raw.scan_iter(match=prefix.encode() + b"*", count=1000)
               if not key.endswith(b":fence"))


def _interrupt_at(monkeypatch: pytest.MonkeyPatch, method: str, call: int, raw: redis.Redis,
                  prefix: str) -> list[int]:
    """``AcquirePlan.<method>`` raises KeyboardInterrupt at its ``call``-th call; the count so far.

    It first lets the server run what is in flight, until the count of the test's keys stops
    changing (not the server's: other tests share it): closing
    a connection with replies unread resets it, and the server drops what it had not read yet
    (the controls' counts would vary); and a write still running when the cleanup's releases
    come would take its locks after them (a busy host: 6,150 locks left once in CI)."""
    original: Callable[..., Any] = getattr(AcquirePlan, method)
    calls = [0]

    def interrupting(plan: AcquirePlan, *args: Any) -> Any:
        calls[0] += 1
        if calls[0] == call:
            _server_settled(raw, prefix)
            raise KeyboardInterrupt
        return original(plan, *args)

    monkeypatch.setattr(AcquirePlan, method, interrupting)
    return calls


def _server_settled(raw: redis.Redis, prefix: str, within: float = 5.0) -> None:
    """Once the count of keys under ``prefix`` has stayed the same for 0.1 s (or ``within`` has passed)."""
    time.sleep(0.1)
    deadline = time.monotonic() + within
    count = _locks_left(raw, prefix)
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = _locks_left(raw, prefix)
        if now == count:
            return
        count = now


def _run_interrupted(url: str, core: str, prefix: str, raw: redis.Redis, control: bool,
                     acquire: Callable[[LockClient], object]) -> int:
    """Locks left on the server once the client's background cleanup is done."""
    with LockClient.from_url(url, core=core, key_prefix=prefix, chunk_size=CHUNK,
                             max_connections=1) as client:
        assert client.query("warm-up").held is False
        if control:  # the fault this file guards against: nobody takes the interrupted chunks
            client._exec.on_orphan = None  # type: ignore[attr-defined]
            client._exec_renewals.on_orphan = None  # type: ignore[attr-defined]
        with pytest.raises(KeyboardInterrupt):
            acquire(client)
        assert eventually(lambda: client.pending_cleanup == 0, 5.0)
        if not control:
            # A write in flight may still be running on the server (its connection given up) when
            # the first release comes: what it takes after that goes with the rechecks that follow
            # (0.5 s and 2 s later, not counted by pending_cleanup).
            eventually(lambda: _locks_left(raw, prefix) == 0, sum(RECHECK_AFTER) + 2.0)
        return _locks_left(raw, prefix)


# Where the interrupt lands, and what a control (nobody taking the interrupted chunks) leaves:
# in-flight: chunks 1 and 2 are written, chunk 1 answers and becomes leases, the interrupt comes
# while chunk 3 is encoded (chunk 2's locks are taken with nobody to read them); handing: chunk
# 2's replies are read and the interrupt comes before any of its leases is made (chunk 2, and
# chunk 3 in flight behind it, are held on the server and the caller will never see them).
WHERE = {"in-flight": ("encode", 3, CHUNK), "handing": ("on_replies", 2, 2 * CHUNK)}


@pytest.mark.parametrize("where", list(WHERE))
@pytest.mark.parametrize("control", [False, True], ids=["handed-over", "control"])
def test_chunks_the_interrupt_leaves_unsettled_are_released(
        redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis,
        monkeypatch: pytest.MonkeyPatch, control: bool, where: str) -> None:
    method, call, held_in_control = WHERE[where]
    calls = _interrupt_at(monkeypatch, method, call, raw, key_prefix)
    names = [f"{where}:{i}" for i in range(5 * CHUNK)]
    left = _run_interrupted(redis_server.url, core_name, key_prefix, raw, control,
                            lambda client: client.acquire_many(names, 30))
    assert calls[0] == call
    if control:
        assert left == held_in_control, "the control must leave the interrupted chunks held"
    else:
        assert left == 0


@pytest.mark.parametrize("control", [False, True], ids=["handed-over", "control"])
def test_an_interrupt_between_writes_of_transactions_releases_what_they_took(
        redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis,
        monkeypatch: pytest.MonkeyPatch, control: bool) -> None:
    # 17 transactions of 1000 fenced locks, eight per write: three writes. The third is encoded
    # once the first has answered: the interrupt there leaves the second write's 8,000 locks
    # taken, in flight.
    calls = _interrupt_at(monkeypatch, "reencode_calls", 3, raw, key_prefix)
    names = [f"tx:{i}" for i in range(17 * CHUNK)]
    left = _run_interrupted(redis_server.url, core_name, key_prefix, raw, control,
                            lambda client: client.acquire_many(names, 30, fenced=True))
    assert calls[0] == 3, "the interrupt did not land between writes"
    if control:
        assert left == 8 * CHUNK, "the control must leave the write in flight's locks held"
    else:
        assert left == 0


def test_an_acquire_interrupted_in_wait_is_released(
        redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # No replica: WAIT would answer 0; the interrupt comes as it is sent.
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix, replicas_ack=1,
                             replicas_timeout=0.1) as client:
        assert client.query("warm-up").held is False
        acquire_interrupted_in_wait(client, [f"w:{i}" for i in range(500)], monkeypatch)
        left = sum(1 for _ in raw.scan_iter(match=key_prefix.encode() + b"*", count=1000))
    assert left == 0, f"{left} locks left held after the interrupt"
