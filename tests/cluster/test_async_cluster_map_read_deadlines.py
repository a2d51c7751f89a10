"""The asyncio Redis Cluster client when a call reads the slot map while nodes do not answer
(SIGSTOP), against the threaded client's rules (each found in review):

- a call that waits for another call's map read, which fails by that call's earlier deadline,
  reads the map itself within its own time (it failed with the other call's ClusterError);
- a call that read the map sends its command within what is left of its deadline (the node's
  executor gave it a whole new timeout: 1.5x the call's);
- auto-renewal signals a lock lost by the expiry the lease believed (2.7 s late: the round
  waited the connection's whole timeout);
- close() while another task's call reads the map lets that call end first: it is served when
  the nodes answer again, and ends by its own deadline when they do not (it got a bare
  CancelledError once, which asyncio code takes for its own cancellation, then
  ClientClosedError while close() cancelled the read);
- and a call's shorter deadline is waited for by that call alone: a renewal round's, made the
  reply deadline on the master's connection, broke that connection for another task's acquire
  (found in review of the fix).

One cluster for the module, no replicas, a node timeout long enough that no pause here makes
a node look failed."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from turbolock import (
    AcquireOutcomeUnknownError,
    ClusterError,
    Lease,
    LockError,
    UnsentTimeoutError,
)
from turbolock._wire.slots import key_slot
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.redis_cluster import RedisCluster

pytestmark = pytest.mark.timing

T = 2.0
SLACK = 0.5


def _client(cluster: RedisCluster, core_name: str, key_prefix: str,
            timeout: float = T) -> AsyncClusterLockClient:
    return AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                           timeout=timeout, connect_timeout=timeout)


def _pause(nodes: list[object]) -> None:
    for node in nodes:
        node.pause()  # type: ignore[attr-defined]


def _resume(nodes: list[object]) -> None:
    for node in nodes:
        node.resume()  # type: ignore[attr-defined]


def test_a_call_waiting_for_another_calls_failed_map_read_reads_it_itself(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str) -> None:
    # Every node stopped at 0; call A (deadline 2.0) starts the read; call B at 0.8 (deadline
    # 2.8) waits for it; the nodes answer again at 2.3: A fails, B succeeds.
    nodes = list(quiet_cluster.nodes)

    async def scenario() -> tuple[object, object]:
        client = _client(quiet_cluster, core_name, key_prefix)
        try:
            assert (await client.query("warm-up")).held is False
            client._cluster.routes.stale = True  # the next call reads the map (as after a MOVED)
            _pause(nodes)
            timer = threading.Timer(2.3, _resume, (nodes,))
            timer.start()
            try:
                a = asyncio.ensure_future(client.try_acquire("a", 30))
                await asyncio.sleep(0.8)
                try:
                    b: object = await client.try_acquire("b", 30)
                except LockError as exc:
                    b = exc
                (a_outcome,) = await asyncio.gather(a, return_exceptions=True)
            finally:
                timer.join()
                _resume(nodes)
            return a_outcome, b
        finally:
            await client.close()

    a, b = asyncio.run(scenario())
    assert isinstance(a, LockError), a  # the control: A's own deadline passed with the nodes stopped
    assert isinstance(b, Lease), f"B ended with {b!r} with 0.5 s of its own left"


def _name_on(client: AsyncClusterLockClient, prefix: str, address: tuple[str, int],
             tag: str = "n") -> str:
    routes = client._cluster.routes
    assert routes.map is not None
    return next(name for name in (f"{{{tag}{i}}}" for i in range(100_000))
                if routes.map.node_of(key_slot((prefix + name).encode())) == address)


def test_a_call_that_read_the_map_sends_within_what_is_left(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str) -> None:
    # The node asked first for the map and the key's master (asked last) both stopped.
    async def scenario() -> list[tuple[str, float, object]]:
        client = _client(quiet_cluster, core_name, key_prefix)
        outcomes = []
        try:
            assert (await client.query("warm-up")).held is False
            routes = client._cluster.routes
            first, last = routes.candidates()[0], routes.candidates()[-1]
            name = _name_on(client, key_prefix, last)
            lease = await client.try_acquire(name, 30)  # a connection to that master
            assert lease is not None
            stopped = [node for node in quiet_cluster.nodes if node.port in (first[1], last[1])]
            calls = {"try_acquire": lambda: client.try_acquire(name + "x", 30),
                     "query": lambda: client.query(name), "release": lambda: client.release(lease)}
            for label, call in calls.items():
                routes.stale = True
                _pause(stopped)
                try:
                    started = time.monotonic()
                    try:
                        outcome: object = await call()
                    except LockError as exc:
                        outcome = exc
                    outcomes.append((label, time.monotonic() - started, outcome))
                finally:
                    _resume(stopped)
        finally:
            await client.close()
        return outcomes

    for label, elapsed, outcome in asyncio.run(scenario()):
        assert isinstance(outcome, LockError), (label, outcome)
        if label == "try_acquire":  # sent, or not: never "not acquired"
            assert isinstance(outcome, AcquireOutcomeUnknownError | UnsentTimeoutError), outcome
        assert elapsed < T + SLACK, f"{label} took {elapsed:.2f}s with a {T}s timeout ({outcome!r})"


def test_renewal_signals_a_lost_lock_by_its_believed_expiry(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str) -> None:
    fired: list[float] = []

    async def scenario() -> float:
        client = _client(quiet_cluster, core_name, key_prefix, timeout=3.0)
        node = quiet_cluster.master_of(key_slot((key_prefix + "renewed").encode()))
        try:
            lease = await client.try_acquire("renewed", 1, auto_renew=True,
                                             on_lost=lambda lease: fired.append(time.monotonic()))
            assert lease is not None
            node.pause()
            believed = lease.expires_at
            try:
                give_up = time.monotonic() + 9
                while not lease.is_lost and time.monotonic() < give_up:
                    believed = lease.expires_at
                    await asyncio.sleep(0.002)
            finally:
                node.resume()
            return believed
        finally:
            await client.close()

    believed = asyncio.run(scenario())
    assert fired, "the loss was never signalled"
    assert fired[0] - believed <= 0.25, f"signalled {fired[0] - believed:+.2f}s after the believed expiry"


@pytest.mark.parametrize("answered", [True, False], ids=["nodes-answer-again", "nodes-silent"])
def test_close_during_another_calls_map_read_lets_it_end_first(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str, answered: bool) -> None:
    nodes = list(quiet_cluster.nodes)

    async def scenario() -> tuple[object, bool, float]:
        client = _client(quiet_cluster, core_name, key_prefix)
        assert (await client.query("warm-up")).held is False
        client._cluster.routes.stale = True
        _pause(nodes)
        try:
            call = asyncio.ensure_future(client.try_acquire("a", 30))
            await asyncio.sleep(0.3)  # its map read under way
            started = time.monotonic()
            closing = asyncio.ensure_future(client.close())
            await asyncio.sleep(0.2)
            if answered:
                _resume(nodes)
            await asyncio.wait_for(closing, T + SLACK)
            took = time.monotonic() - started
            try:
                outcome: object = await call
            except BaseException as exc:  # what it raises is what is checked, CancelledError included
                outcome = exc
            task = asyncio.current_task()
            return outcome, task is not None and task.cancelling() > 0, took
        finally:
            _resume(nodes)

    outcome, cancelled, took = asyncio.run(scenario())
    assert not cancelled
    if answered:
        assert isinstance(outcome, Lease), f"the call under way as the client closed got {outcome!r}"
    else:  # its deadline (T from 0.3 s before close began) passed, the map unread
        assert isinstance(outcome, ClusterError), f"the call ended with {outcome!r}"
        assert "no cluster node gave a slot map" in str(outcome), outcome
    assert took < T + SLACK, f"close() took {took:.2f}s"


@pytest.mark.parametrize("renewed", [False, True], ids=["control", "renewed"])
def test_a_renewal_rounds_deadline_does_not_fail_another_tasks_call(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str, renewed: bool) -> None:
    # A lease of 1 s (auto-renewed: its round due at ~0.67 s, its deadline before 1 s) and another
    # task's acquire with 3 s of its own, on the same master, stopped from 0.55 s to 1.55 s.
    async def scenario() -> object:
        client = _client(quiet_cluster, core_name, key_prefix, timeout=3.0)
        try:
            assert (await client.query("warm-up")).held is False
            master = client._cluster.routes.candidates()[0]
            node = next(n for n in quiet_cluster.nodes if n.port == master[1])
            started = time.monotonic()
            name = _name_on(client, key_prefix, master, "a")
            lease = await client.try_acquire(name, 1.0, auto_renew=renewed)
            assert lease is not None
            await asyncio.sleep(max(0.0, started + 0.55 - time.monotonic()))
            node.pause()
            timer = threading.Timer(1.0, node.resume)
            timer.start()
            try:
                try:
                    return await client.try_acquire(_name_on(client, key_prefix, master, "b"), 30)
                except LockError as exc:
                    return exc
            finally:
                timer.join()
                node.resume()
        finally:
            await client.close()

    outcome = asyncio.run(scenario())
    assert isinstance(outcome, Lease), f"the acquire ended with {outcome!r}, the master answering after ~1 s"
