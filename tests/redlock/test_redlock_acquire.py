"""Redlock with every master up, on 3 and 5 masters: acquire, extend, release, the results and
their statuses, the Lock object, and what must never leak (tokens)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import pytest

from _raw import Raws
from turbolock import (
    ExtensionLimitError,
    InstanceSummary,
    LockClient,
    LockLostError,
    LockNotOwnedError,
    LockUsageError,
    RedlockClient,
    RedlockLease,
    RedlockNotAcquiredError,
    RedlockStatus,
)
from turbolock.redis_server import RedisServer

from ._helpers import TTL, values

MakeRedlock = Callable[..., RedlockClient]


def test_acquire_takes_the_lock_on_every_master_with_one_token(
        masters: list[RedisServer], make_redlock: MakeRedlock, raws: Raws, key_prefix: str) -> None:
    client = make_redlock(masters)
    assert client.quorum == len(masters) // 2 + 1
    result = client.acquire("order:1", TTL)
    assert result and result.status is RedlockStatus.ACQUIRED and result.attempts == 1
    assert result.instances == InstanceSummary(len(masters), 0, 0)
    lease = result.lease
    assert isinstance(lease, RedlockLease)
    assert values(raws(masters), key_prefix + "order:1") == [lease.token] * len(masters)
    # Validity: the ttl less the time taken and the drift allowance (1% + 2 ms), never more.
    assert TTL - TTL * 0.01 - 0.002 - 0.5 < lease.valid_for() < TTL - TTL * 0.01 - 0.002
    assert lease.status is RedlockStatus.ACQUIRED
    assert client.release(lease) is True
    assert lease.status is RedlockStatus.UNLOCKED
    assert values(raws(masters), key_prefix + "order:1") == [None] * len(masters)


def test_a_held_lock_is_conflicted_for_others(masters: list[RedisServer], make_redlock: MakeRedlock) -> None:
    first, second = make_redlock(masters), make_redlock(masters)
    lease = first.try_acquire("account:7", TTL)
    assert lease is not None
    result = second.acquire("account:7", TTL, blocking=False)
    assert not result and result.lease is None
    assert result.status is RedlockStatus.CONFLICTED
    assert result.instances == InstanceSummary(0, len(masters), 0)
    assert "conflicted" in result.describe() and "account:7" in result.describe()
    assert second.try_acquire("account:7", TTL) is None
    assert first.release(lease)
    assert second.try_acquire("account:7", TTL) is not None


def test_conflicted_on_a_minority_still_acquires(three: list[RedisServer], make_redlock: MakeRedlock,
                                                 raws: Raws, key_prefix: str) -> None:
    raws(three)[0].set(key_prefix + "split", b"someone-else", px=60_000)
    client = make_redlock(three)
    result = client.acquire("split", TTL, blocking=False)
    assert result.status is RedlockStatus.ACQUIRED
    assert result.instances == InstanceSummary(2, 1, 0)
    assert result.lease is not None and client.release(result.lease)
    assert raws(three)[0].get(key_prefix + "split") == b"someone-else"


def test_a_lock_held_on_a_minority_alone_is_released_again(
        three: list[RedisServer], make_redlock: MakeRedlock, raws: Raws, key_prefix: str) -> None:
    for raw in raws(three)[1:]:
        raw.set(key_prefix + "mostly-taken", b"someone-else", px=60_000)
    client = make_redlock(three)
    result = client.acquire("mostly-taken", TTL, blocking=False)
    assert result.status is RedlockStatus.CONFLICTED
    assert result.instances == InstanceSummary(1, 2, 0)
    # What was taken on master 0 does not count, and is not left there.
    assert values(raws(three), key_prefix + "mostly-taken") == [None, b"someone-else", b"someone-else"]


def test_blocking_acquire_retries_within_its_timeout(three: list[RedisServer],
                                                     make_redlock: MakeRedlock) -> None:
    holder = make_redlock(three)
    waiter = make_redlock(three, retry_count=None, retry_delay=0.02)
    waiter.query("busy")  # its connections open: on a loaded host the first attempt's took the 0.1 s
    lease = holder.try_acquire("busy", 0.3)
    assert lease is not None
    started = time.monotonic()
    result = waiter.acquire("busy", TTL, timeout=0.1)
    assert result.status is RedlockStatus.CONFLICTED and result.attempts > 1
    assert time.monotonic() - started < 0.1 + 1.0  # never much past the caller's wait
    result = waiter.acquire("busy", TTL, timeout=5)  # the holder's 0.3 s ttl runs out
    assert result.status is RedlockStatus.ACQUIRED and result.lease is not None
    assert waiter.release(result.lease) and not holder.release(lease)


def test_the_retry_count_bounds_a_blocking_acquire(three: list[RedisServer],
                                                   make_redlock: MakeRedlock) -> None:
    holder = make_redlock(three)
    waiter = make_redlock(three, retry_count=2, retry_delay=0.005)
    assert holder.try_acquire("busy", TTL) is not None
    result = waiter.acquire("busy", TTL)
    assert result.status is RedlockStatus.CONFLICTED and result.attempts == 3
    assert "after 3 attempts" in result.describe()


def test_extend_resets_the_ttl_on_every_master(masters: list[RedisServer], make_redlock: MakeRedlock,
                                              raws: Raws, key_prefix: str) -> None:
    client = make_redlock(masters)
    lease = client.try_acquire("job", 1)
    assert lease is not None
    assert client.extend(lease, 30) is True
    assert lease.ttl == 30 and lease.extensions == 1 and lease.valid_for() > 29
    assert all(raw.pttl(key_prefix + "job") > 29_000 for raw in raws(masters))
    assert client.release(lease)
    assert client.extend(lease, 30) is False  # released: nothing to extend


def test_extend_sets_the_key_again_where_a_master_lost_it(three: list[RedisServer], make_redlock: MakeRedlock,
                                                         raws: Raws, key_prefix: str) -> None:
    client = make_redlock(three)
    lease = client.try_acquire("thinning", TTL)
    assert lease is not None
    raws(three)[0].delete(key_prefix + "thinning")  # as a restart without persistence would
    assert client.extend(lease, TTL)
    assert values(raws(three), key_prefix + "thinning") == [lease.token] * 3
    assert client.release(lease)


def test_extend_fails_once_others_hold_a_majority(three: list[RedisServer], make_redlock: MakeRedlock,
                                                  raws: Raws, key_prefix: str) -> None:
    client = make_redlock(three)
    lease = client.try_acquire("taken-over", TTL)
    assert lease is not None
    for raw in raws(three)[:2]:
        raw.set(key_prefix + "taken-over", b"thief", px=60_000)
    assert client.extend(lease, TTL) is False
    assert client.release(lease) is False  # not ours on a majority; the thief's keys stay
    assert values(raws(three), key_prefix + "taken-over") == [b"thief", b"thief", None]


def test_no_extend_after_the_validity_ended(three: list[RedisServer], make_redlock: MakeRedlock) -> None:
    client = make_redlock(three)
    lease = client.try_acquire("brief", 0.1)
    assert lease is not None
    time.sleep(0.12)
    assert lease.valid_for() == 0 and lease.status is RedlockStatus.EXPIRED
    with pytest.raises(LockLostError):
        lease.ensure_held()
    assert client.extend(lease, TTL) is False  # even though nobody else took it


def test_max_extensions_limits_extends(three: list[RedisServer], make_redlock: MakeRedlock) -> None:
    client = make_redlock(three)
    lease = client.try_acquire("limited", TTL, max_extensions=2)
    assert lease is not None
    assert client.extend(lease, TTL) and client.extend(lease, TTL)
    with pytest.raises(ExtensionLimitError, match="limited"):
        client.extend(lease, TTL)
    assert lease.extensions == 2 and client.release(lease)


def test_the_token_never_shows(three: list[RedisServer], make_redlock: MakeRedlock) -> None:
    client = make_redlock(three)
    token = b"T0KEN-" + b"x" * 20
    result = client.acquire("secret", TTL, token=token)
    assert result.lease is not None and result.lease.token == token
    other = make_redlock(three).acquire("secret", TTL, blocking=False)
    texts = [repr(result), repr(result.lease), repr(other), other.describe(), repr(client)]
    lock = client.lock("secret", TTL, blocking=False, token=token)
    with pytest.raises(RedlockNotAcquiredError) as info:
        lock.__enter__()
    texts += [str(info.value), repr(lock)]
    assert not [text for text in texts if "T0KEN" in text]
    assert client.release(result.lease)


def test_leases_belong_to_their_client(three: list[RedisServer], make_redlock: MakeRedlock,
                                       key_prefix: str) -> None:
    first, second = make_redlock(three), make_redlock(three)
    lease = first.try_acquire("mine", TTL)
    assert lease is not None
    with pytest.raises(ValueError, match="another client"):
        second.release(lease)
    single = LockClient.from_url(three[0].url, key_prefix=key_prefix)
    try:
        with pytest.raises(TypeError):
            single.release(lease)  # a RedlockLease is no single-server Lease
        plain = single.try_acquire("plain", TTL)
        with pytest.raises(TypeError):
            first.release(plain)  # type: ignore[arg-type]
    finally:
        single.close()
    assert first.release(lease)


def test_existing_lock_clients_can_be_the_masters(three: list[RedisServer], core_name: str, key_prefix: str,
                                                  raws: Raws) -> None:
    singles = [LockClient.from_url(server.url, core=core_name, key_prefix=key_prefix) for server in three]
    try:
        with RedlockClient(singles) as client:
            assert client.key_prefix == key_prefix.encode()
            lease = client.try_acquire("shared", TTL)
            assert lease is not None
            assert values(raws(three), key_prefix + "shared") == [lease.token] * 3
            # The masters' own single-lock calls still work alongside (same pools).
            single = singles[0].try_acquire("alone", TTL)
            assert single is not None and singles[0].release(single)
            assert client.release(lease)
        # Closing the Redlock client leaves the LockClients it was given open and usable.
        assert all(s.try_acquire("after", TTL) is not None for s in singles)
    finally:
        for single_client in singles:
            single_client.close()


def test_lock_object_as_context_manager_and_decorator(three: list[RedisServer], make_redlock: MakeRedlock,
                                                      raws: Raws, key_prefix: str) -> None:
    client = make_redlock(three)
    lock = client.lock("report", TTL)
    assert lock.status is None
    with lock:
        assert lock.status is RedlockStatus.ACQUIRED and lock.valid_for() > 0
        lock.ensure_held()
        lock.extend()
        assert lock.result is not None and lock.result.instances.acquired == 3
        with pytest.raises(LockUsageError):
            lock.acquire()
        other = make_redlock(three).lock("report", TTL, blocking=False)
        with pytest.raises(RedlockNotAcquiredError, match="conflicted") as info:
            with other:
                pass
        assert info.value.result is not None and info.value.result.status is RedlockStatus.CONFLICTED
    assert lock.status is RedlockStatus.UNLOCKED and lock.lease is None
    assert values(raws(three), key_prefix + "report") == [None] * 3

    calls: list[float] = []

    @client.lock("decorated", TTL)
    def job() -> None:
        calls.append(raws(three)[1].pttl(key_prefix + "decorated"))

    job()
    job()
    assert len(calls) == 2 and all(ttl > 0 for ttl in calls)


def test_lock_object_reports_a_lock_lost_inside_the_block(three: list[RedisServer], make_redlock: MakeRedlock,
                                                          raws: Raws, key_prefix: str) -> None:
    client = make_redlock(three)
    with pytest.raises(LockNotOwnedError):
        with client.lock("vanishing", TTL):
            for raw in raws(three):
                raw.delete(key_prefix + "vanishing")
    with pytest.raises(ZeroDivisionError):  # the block's own error wins over the lost lock
        with client.lock("vanishing", TTL):
            for raw in raws(three):
                raw.delete(key_prefix + "vanishing")
            1 / 0  # noqa: B018


def test_one_client_shared_by_threads(three: list[RedisServer], make_redlock: MakeRedlock) -> None:
    client = make_redlock(three, retry_count=None, retry_delay=0.002)
    inside = [0]
    peak = [0]
    failures: list[BaseException] = []
    guard = threading.Lock()

    def work(index: int) -> None:
        try:
            for round_ in range(20):
                own = client.try_acquire(f"own:{index}:{round_}", TTL)
                assert own is not None and client.release(own)
                result = client.acquire("shared", TTL, timeout=10)
                assert result.lease is not None, result.describe()
                with guard:
                    inside[0] += 1
                    peak[0] = max(peak[0], inside[0])
                time.sleep(0.0005)
                with guard:
                    inside[0] -= 1
                assert client.release(result.lease)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[0]
    assert peak[0] == 1


def test_a_forked_child_cannot_use_its_parents_leases(three: list[RedisServer],
                                                      make_redlock: MakeRedlock) -> None:
    client = make_redlock(three)
    lease = client.try_acquire("parent", TTL)
    assert lease is not None
    pid = os.fork()
    if pid == 0:  # the child: its own connections, its own locks, never the parent's
        code = 1
        try:
            try:
                client.release(lease)
            except ValueError as exc:
                code = 0 if "another process" in str(exc) else 2
            child = client.try_acquire("child", TTL)
            if child is None or not client.release(child) or client.try_acquire("parent", TTL) is not None:
                code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert client.release(lease)  # the parent's connections and lease still work


@pytest.mark.parametrize("control", [False, True], ids=["cleaned", "control"])
@pytest.mark.parametrize("call", ["try_acquire", "release"])
def test_an_interrupted_call_leaves_no_lock_behind(call: str, control: bool, three: list[RedisServer],
                                                   make_redlock: MakeRedlock, raws: Raws, key_prefix: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the middle of the call: after the attempt took the lock on every master (whose
    token the caller never learns), or before a release went out. Either way the lock is
    released in the background. The control forgets the owed releases and must find it held."""
    client = make_redlock(three)
    lease = client.try_acquire("interrupted", 30) if call == "release" else None
    if control:
        monkeypatch.setattr(client, "_abandoned", lambda *args: None)
        monkeypatch.setattr(client, "_release_owed", lambda *args: None)
    fan_one = client._fan_one

    def interrupted(*args: object) -> object:
        if lease is None:
            fan_one(*args)
        raise KeyboardInterrupt

    client._fan_one = interrupted
    with pytest.raises(KeyboardInterrupt):
        if lease is None:
            client.try_acquire("interrupted", 30)
        else:
            client.release(lease)
    client._fan_one = fan_one
    assert client.try_acquire("another", TTL) is not None  # owed releases also ride in front of a call
    deadline = time.monotonic() + (0.5 if control else 2.0)
    while None not in values(raws(three), key_prefix + "interrupted") and time.monotonic() < deadline:
        time.sleep(0.01)
    left = values(raws(three), key_prefix + "interrupted")
    if control:
        assert None not in left and len(set(left)) == 1, "the control must leave the lock held"
    else:
        assert left == [None, None, None]
