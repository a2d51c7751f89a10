"""A slot left MIGRATING on its source while the target is not IMPORTING (a reshard that died
half-way and was half undone): the source answers ASK, and the target answers the ASKING
command with MOVED back to the source. Nothing ran; the reply went back to the caller as a raw
``ResponseError("MOVED ...")`` (found by review). Now it is followed as a MOVED: the calls end
within their deadline with a typed error (the key keeps bouncing), and work again once the
slot is stable.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from _raw import NodeRaws
from turbolock import AcquireOutcomeUnknownError, ClusterError, LockError, TimeoutError, UnsentTimeoutError
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._helpers import node_id, other_master

TIMEOUT = 1.0

# The key was redirected too many times, or (a loaded host: each bounce slower) the deadline
# came first, before the next resend: both say nothing ran.
BOUNCED = (ClusterError, UnsentTimeoutError)
EXPECTED: dict[str, tuple[type[LockError], ...]] = {
    "try_acquire": BOUNCED,
    "query": BOUNCED,
    "acquire_many": (AcquireOutcomeUnknownError,),  # its item never sent (.not_sent), or unanswered
    "query_many": (TimeoutError,),  # its keys bounced until the deadline
}


def _call(client: ClusterLockClient, op: str, name: str) -> object:
    if op == "try_acquire":
        return client.try_acquire(name, 30)
    if op == "acquire_many":
        return client.acquire_many([name], 30)
    if op == "query":
        return client.query(name)
    return client.query_many([name])


@pytest.mark.parametrize("op", list(EXPECTED))
def test_ask_answered_by_moved_is_followed_and_ends_in_a_typed_error_in_time(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, raws: NodeRaws, op: str) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    client = make_cluster_client(cluster, timeout=TIMEOUT)
    name = "{halfmove}:x"
    slot = key_slot((key_prefix + name).encode())
    assert client.query(name).held is False  # the client knows the slot's master
    source = cluster.master_of(slot)
    src, dst = raws(source), raws(other_master(cluster, source))
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(dst))
    try:
        started = time.monotonic()
        with pytest.raises(LockError) as raised:
            _call(client, op, name)
        took = time.monotonic() - started
    finally:
        src.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
    assert type(raised.value) in EXPECTED[op], repr(raised.value)
    assert "MOVED" not in str(raised.value)
    if isinstance(raised.value, AcquireOutcomeUnknownError):
        # Never sent at the deadline, or (a loaded host) a resend of it still unanswered then:
        # maybe taken, in .names (cleaned up in the background; it cannot have run here).
        outcome = (raised.value.not_sent, raised.value.names)
        assert outcome in (([name], []), ([], [name])), outcome
    assert took < TIMEOUT + 0.5, f"{op} took {took:.2f}s with a {TIMEOUT}s timeout"
    assert src.exists(key_prefix + name) == 0  # nothing ran (the target serves no such slot)
    lease = client.try_acquire(name, 30)  # the slot stable again: the call goes through
    assert lease is not None and client.release(lease)
