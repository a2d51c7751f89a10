"""Redlock when masters fail: down, SIGSTOPped, restarted; and the documented hazard of a
master restarted without persistence, beside the safe configuration (a delayed restart)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from _raw import Raws
from turbolock import InstanceSummary, QuorumError, RedlockClient, RedlockStatus
from turbolock.redis_server import RedisServer

from ._helpers import TTL, values, wait_for

pytestmark = pytest.mark.slow

MakeRedlock = Callable[..., RedlockClient]
OwnMasters = Callable[[int], list[RedisServer]]

# Bounds, not speeds: a stuck master must cost about one node timeout (50 ms), never the
# 5 s call timeout of a single-server client; a loaded machine gets a wide margin.
BOUND = 1.5


@pytest.mark.parametrize("count", [3, 5])
def test_one_master_down_still_acquires(own_masters: OwnMasters, make_redlock: MakeRedlock, raws: Raws,
                                        key_prefix: str, count: int) -> None:
    servers = own_masters(count)
    client = make_redlock(servers)
    servers[1].stop(remove_directory=False)
    result = client.acquire("order", TTL, blocking=False)
    assert result.status is RedlockStatus.ACQUIRED
    assert result.instances == InstanceSummary(count - 1, 0, 1)
    assert any("cannot connect" in error for error in result.errors)
    assert result.lease is not None and client.release(result.lease)
    live = [server for i, server in enumerate(servers) if i != 1]
    assert values(raws(live), key_prefix + "order") == [None] * (count - 1)


@pytest.mark.parametrize("count", [3, 5])
def test_a_majority_down_is_no_quorum_and_leaves_nothing_held(
        own_masters: OwnMasters, make_redlock: MakeRedlock, raws: Raws, key_prefix: str, count: int) -> None:
    servers = own_masters(count)
    client = make_redlock(servers, retry_count=3, retry_delay=0.005)
    down = servers[: count // 2 + 1]
    for server in down:
        server.stop(remove_directory=False)
    live = servers[count // 2 + 1:]
    result = client.acquire("order", TTL)
    assert result.status is RedlockStatus.NO_QUORUM and result.lease is None
    assert result.instances == InstanceSummary(len(live), 0, len(down))
    assert result.attempts == 4  # the first try and 3 retries
    assert "no quorum" in result.describe()
    assert values(raws(live), key_prefix + "order") == [None] * len(live)
    with pytest.raises(QuorumError, match="no quorum") as info:
        client.try_acquire("order", TTL)
    assert info.value.names == ["order"] and info.value.result.status is RedlockStatus.NO_QUORUM
    with pytest.raises(QuorumError):
        with client.lock("order", TTL, blocking=False):
            pass
    assert values(raws(live), key_prefix + "order") == [None] * len(live)
    for server in down:
        server.start()
    lease = client.try_acquire("order", TTL)  # the masters came back: the lock works again
    assert lease is not None and lease.instances == InstanceSummary(count, 0, 0)


def test_a_stopped_master_costs_one_node_timeout(own_masters: OwnMasters, make_redlock: MakeRedlock,
                                                 raws: Raws, key_prefix: str) -> None:
    servers = own_masters(3)
    client = make_redlock(servers)
    warm = client.try_acquire("warm", TTL)  # connections open to all three
    assert warm is not None and client.release(warm)
    servers[0].pause()
    try:
        for attempt in range(3):  # a pooled connection first, fresh connections after
            started = time.monotonic()
            result = client.acquire(f"slow-{attempt}", 10, blocking=False)
            elapsed = time.monotonic() - started
            assert result.status is RedlockStatus.ACQUIRED, result.describe()
            assert result.instances == InstanceSummary(2, 0, 1)
            assert elapsed < BOUND, f"acquire took {elapsed:.3f}s with one master stopped"
            assert any("did not answer" in error for error in result.errors)
            assert result.lease is not None and result.lease.valid_for() > 10 - BOUND - 0.2
            assert client.release(result.lease)
    finally:
        servers[0].resume()


def test_an_acquire_lost_on_stopped_masters_is_cleaned_up_when_they_answer(
        own_masters: OwnMasters, make_redlock: MakeRedlock, raws: Raws, key_prefix: str) -> None:
    servers = own_masters(3)
    client = make_redlock(servers)
    warm = client.try_acquire("warm", TTL)
    assert warm is not None and client.release(warm)
    servers[1].pause()
    servers[2].pause()
    try:
        started = time.monotonic()
        result = client.acquire("stalled", 10, blocking=False)
        assert time.monotonic() - started < BOUND
        assert result.status is RedlockStatus.NO_QUORUM
        assert result.instances == InstanceSummary(1, 0, 2)
        assert raws(servers)[0].get(key_prefix + "stalled") is None  # released at once where it answered
        # The release sent to the stopped ones got no answer either: it is kept for later.
        assert [master.pending_cleanup for master in client.masters] == [0, 1, 1]
    finally:
        servers[1].resume()
        servers[2].resume()
    # The stopped masters run what was queued when they resume; the release is sent again (in
    # the background, or in front of the next call to them), whatever order they ran it in.
    assert wait_for(lambda: [master.pending_cleanup for master in client.masters] == [0, 0, 0], 5.0)
    lease = client.try_acquire("another", TTL)
    assert lease is not None
    assert values(raws(servers), key_prefix + "stalled") == [None] * 3
    assert client.release(lease)


def test_release_after_a_master_restarted(own_masters: OwnMasters, make_redlock: MakeRedlock, raws: Raws,
                                          key_prefix: str) -> None:
    servers = own_masters(3)
    client = make_redlock(servers)
    lease = client.try_acquire("held", TTL)
    assert lease is not None
    servers[2].restart()  # forgets the key and the scripts
    assert client.extend(lease, TTL)  # reloads the script, sets the key again there
    assert values(raws(servers), key_prefix + "held") == [lease.token] * 3
    servers[0].restart()
    assert client.release(lease)  # released on the two that had it
    assert values(raws(servers), key_prefix + "held") == [None] * 3


def test_a_master_restarted_mid_hold_is_taken_back_by_renewal(
        own_masters: OwnMasters, make_redlock: MakeRedlock, raws: Raws, key_prefix: str) -> None:
    servers = own_masters(3)
    holder = make_redlock(servers)
    rival = make_redlock(servers)
    lost: list[object] = []
    lease = holder.try_acquire("renewed", 1.0, auto_renew=True, on_lost=lost.append)
    assert lease is not None
    connections = raws(servers)
    servers[0].restart()
    assert wait_for(lambda: connections[0].get(key_prefix + "renewed") == lease.token, 3.0)
    servers[1].restart()
    assert wait_for(lambda: connections[1].get(key_prefix + "renewed") == lease.token, 3.0)
    assert rival.try_acquire("renewed", TTL) is None
    assert not lost and not lease.is_lost and lease.valid_for() > 0
    assert holder.release(lease)


def test_hazard_a_master_restarted_without_persistence_lets_a_second_client_in(
        own_masters: OwnMasters, make_redlock: MakeRedlock) -> None:
    """The hazard the Redlock page documents: A holds the lock on masters 0 and 1 (master 2 was
    down), master 1 restarts at once with no persistence, and B takes masters 1 and 2."""
    servers = own_masters(3)
    first, second = make_redlock(servers), make_redlock(servers)
    servers[2].stop(remove_directory=False)
    lease_a = first.try_acquire("hazard", 10)
    assert lease_a is not None and lease_a.instances == InstanceSummary(2, 0, 1)
    servers[2].start()
    servers[1].restart()  # immediately, with the key lost
    lease_b = second.try_acquire("hazard", 10)
    assert lease_b is not None, "the hazard did not reproduce"
    assert lease_b.instances == InstanceSummary(2, 1, 0)
    assert lease_a.valid_for() > 0 and lease_b.valid_for() > 0  # both believe they hold it


def test_safe_a_restart_delayed_past_the_ttl_keeps_the_second_client_out(
        own_masters: OwnMasters, make_redlock: MakeRedlock) -> None:
    """The same sequence, but master 1 stays down longer than the ttl before it comes back:
    B can only get in after A's validity is over."""
    ttl = 0.5
    servers = own_masters(3)
    first, second = make_redlock(servers), make_redlock(servers)
    servers[2].stop(remove_directory=False)
    lease_a = first.try_acquire("safe", ttl)
    assert lease_a is not None
    servers[2].start()
    restart = threading.Thread(target=servers[1].restart, kwargs={"down_for": ttl + 0.2})
    restart.start()
    taken_at = None
    statuses: set[RedlockStatus] = set()
    try:
        while taken_at is None and (restart.is_alive() or time.monotonic() < lease_a.expires_at + 2):
            result = second.acquire("safe", ttl, blocking=False)
            statuses.add(result.status)
            if result.lease is not None:
                taken_at = time.monotonic()
                assert lease_a.valid_for() == 0, "B got in while A's lock was still valid"
            time.sleep(0.01)
    finally:
        restart.join()
    assert taken_at is not None and taken_at >= lease_a.expires_at
    assert RedlockStatus.CONFLICTED in statuses or RedlockStatus.NO_QUORUM in statuses
