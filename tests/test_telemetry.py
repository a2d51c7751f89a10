"""OpenTelemetry metrics (``turbolock.telemetry``) read back through the SDK's in-memory reader,
on both front ends and both cores: the right counts per outcome, call durations per operation,
blocking waits, lost locks and renewal lag; no lock name unless asked, never a token; nothing
recorded after ``uninstrument()``; a clear error without opentelemetry-api or with a bad argument."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from _blocking_async import FRONTS, Blocking
from turbolock import AutoRenew, telemetry
from turbolock.errors import InvalidArgumentTypeError


class Recorded:
    """What the reader holds: ``points(name)`` -> [(attributes, data point)]."""

    def __init__(self, reader: InMemoryMetricReader) -> None:
        self.reader = reader

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend((dict(p.attributes), p) for p in metric.data.data_points)
        return found

    def total(self, name: str, **attributes: str) -> int:
        return sum(p.value for attrs, p in self.points(name) if attributes.items() <= attrs.items())

    def histogram(self, name: str, **attributes: str) -> tuple[int, float]:
        matching = [p for attrs, p in self.points(name) if attributes.items() <= attrs.items()]
        return sum(p.count for p in matching), sum(p.sum for p in matching)

    def every_attribute_value(self) -> list[str]:
        data = self.reader.get_metrics_data()
        return [str(value) for resource in data.resource_metrics for scope in resource.scope_metrics
                for metric in scope.metrics for point in metric.data.data_points
                for value in point.attributes.values()]


def _instrumented(lock_name_attribute: bool = False) -> Iterator[Recorded]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    telemetry.instrument(provider, lock_name_attribute=lock_name_attribute)
    try:
        yield Recorded(reader)
    finally:
        telemetry.uninstrument()
        provider.shutdown()


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    yield from _instrumented()


@pytest.fixture
def recorded_with_names() -> Iterator[Recorded]:
    yield from _instrumented(lock_name_attribute=True)


def test_single_calls_are_counted_by_outcome_with_their_durations(
        make_client: Callable[..., Any], recorded: Recorded, raw: redis.Redis, key_prefix: str) -> None:
    client = make_client()
    first = client.try_acquire("a", 30)
    second = client.try_acquire("b", 30)
    assert first is not None and second is not None
    assert client.try_acquire("a", 30) is None  # held: contended
    assert client.extend(first, 30)
    raw.set(key_prefix + "b", b"someone else")  # taken over: its extend and release are refused
    assert not client.extend(second, 30)
    assert client.release(first)
    assert not client.release(second)
    assert recorded.total("turbolock.lock.acquisitions") == 2
    assert recorded.total("turbolock.lock.contended") == 1
    assert recorded.total("turbolock.lock.extensions", **{"turbolock.extended": "true"}) == 1
    assert recorded.total("turbolock.lock.extensions", **{"turbolock.extended": "false"}) == 1
    assert recorded.total("turbolock.lock.releases", **{"turbolock.released": "true"}) == 1
    assert recorded.total("turbolock.lock.releases", **{"turbolock.released": "false"}) == 1
    assert recorded.total("turbolock.lock.lost") == 1  # the refused extend found it lost
    for operation, calls in (("acquire", 3), ("extend", 2), ("release", 2)):
        count, seconds = recorded.histogram("turbolock.call.duration", **{"turbolock.operation": operation})
        assert count == calls and 0 < seconds < calls * 1.0
    values = recorded.every_attribute_value()
    assert "a" not in values and "b" not in values  # no lock names by default
    assert not any(first.token.hex() in v or repr(first.token) in v for v in values)


def test_bulk_calls_count_every_lock(make_client: Callable[..., Any], recorded: Recorded) -> None:
    client = make_client()
    held = client.try_acquire("n3", 30)
    result = client.acquire_many([f"n{i}" for i in range(10)], 30)
    assert len(result.acquired) == 9
    assert recorded.total("turbolock.lock.acquisitions") == 1 + 9
    assert recorded.total("turbolock.lock.contended") == 1
    assert client.extend_many(result.acquired, 30) == [True] * 9
    assert client.release_many([*result.acquired, held]) == [True] * 10
    assert recorded.total("turbolock.lock.extensions", **{"turbolock.extended": "true"}) == 9
    assert recorded.total("turbolock.lock.releases", **{"turbolock.released": "true"}) == 10
    for operation in ("acquire_many", "extend_many", "release_many"):
        count, _ = recorded.histogram("turbolock.call.duration", **{"turbolock.operation": operation})
        assert count == 1


def test_an_all_or_nothing_rollback_is_not_a_release(make_client: Callable[..., Any],
                                                     recorded: Recorded) -> None:
    client = make_client()
    held = client.try_acquire("n5", 30)
    result = client.acquire_many([f"n{i}" for i in range(10)], 30, all_or_nothing=True)
    assert result.acquired == [] and result.not_acquired == ["n5"]
    assert recorded.total("turbolock.lock.acquisitions") == 1  # the try_acquire's; none kept by the bulk
    assert recorded.total("turbolock.lock.contended") == 1
    assert recorded.total("turbolock.lock.releases") == 0  # the 9 given back were never the caller's
    assert client.release(held)


def test_a_failed_blocking_acquire_leaves_no_wait_for_the_next(make_client: Callable[..., Any],
                                                             recorded: Recorded, raw: redis.Redis) -> None:
    client = make_client()
    lock = client.lock("stale", 30, timeout=0.3)
    holder = client.try_acquire("stale", 30)
    assert not lock.acquire()  # waited 0.3 s and gave up
    client.release(holder)
    time.sleep(0.5)
    assert lock.acquire(blocking=False)  # no wait: must not report one
    lock.release()
    count, seconds = recorded.histogram("turbolock.lock.wait")
    assert count == 1 and seconds < 0.45


def test_a_blocking_wait_is_recorded_with_its_outcome(make_client: Callable[..., Any],
                                                      recorded_with_names: Recorded) -> None:
    client = make_client()
    holder = client.try_acquire("queue", 30)
    assert holder is not None
    timer = threading.Timer(0.3, client.release, (holder,))
    timer.start()
    try:
        lock = client.lock("queue", 30, timeout=5)
        assert lock.acquire()
        lock.release()
    finally:
        timer.join()
    impatient = client.lock("queue", 30, timeout=0.2)
    again = client.try_acquire("queue", 30)
    assert not impatient.acquire()
    client.release(again)
    count, seconds = recorded_with_names.histogram("turbolock.lock.wait", **{"turbolock.acquired": "true"})
    assert count == 1 and 0.25 <= seconds < 2.0
    count, seconds = recorded_with_names.histogram("turbolock.lock.wait", **{"turbolock.acquired": "false"})
    assert count == 1 and 0.15 <= seconds < 1.0
    waits = recorded_with_names.points("turbolock.lock.wait")
    names = {attrs.get("turbolock.lock.name") for attrs, _ in waits}
    assert names == {"queue"}  # asked for: the name is an attribute


def test_renewal_lag_and_a_lost_renewed_lock(make_client: Callable[..., Any], recorded: Recorded,
                                            raw: redis.Redis, key_prefix: str) -> None:
    client = make_client()
    kept = client.try_acquire("kept", 0.6, auto_renew=AutoRenew(renew_before=0.3))
    doomed = client.try_acquire("doomed", 0.6, auto_renew=AutoRenew(renew_before=0.3))
    assert kept is not None and doomed is not None
    raw.delete(key_prefix + "doomed")
    assert doomed.lost.wait(3.0)
    time.sleep(0.4)  # another round for the lock still held
    assert client.release(kept)
    assert recorded.total("turbolock.lock.lost") == 1
    count, seconds = recorded.histogram("turbolock.renewal.lag")
    assert count >= 2 and 0 <= seconds / count < 0.2  # rounds began close to when they were due


def test_nothing_is_recorded_after_uninstrument(client: Any) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    telemetry.instrument(provider)
    assert telemetry.instrumented()
    lease = client.try_acquire("x", 30)
    telemetry.uninstrument()
    assert not telemetry.instrumented()
    client.release(lease)
    client.try_acquire("x", 30)
    recorded = Recorded(reader)
    assert recorded.total("turbolock.lock.acquisitions") == 1
    assert recorded.total("turbolock.lock.releases") == 0
    provider.shutdown()


def test_a_bad_argument_is_named_and_nothing_changes() -> None:
    with pytest.raises(InvalidArgumentTypeError, match="lock_name_attribute"):
        telemetry.instrument(lock_name_attribute="yes")  # type: ignore[arg-type]
    assert not telemetry.instrumented()


def test_without_opentelemetry_the_error_names_the_extra() -> None:
    program = ("import sys; sys.modules['opentelemetry'] = None\n"
               "from turbolock import telemetry\n"
               "try:\n    telemetry.instrument()\n"
               "except ImportError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert "pip install 'turbolock[otel]'" in done.stdout, done.stderr


@pytest.mark.parametrize("front", FRONTS)
def test_redlock_acquires_and_releases_are_counted(three: list[Any], core_name: str, key_prefix: str,
                                                   recorded: Recorded, front: str) -> None:
    """Each call timed too: a Redlock release was counted but never timed (found in review)."""
    from turbolock import RedlockClient
    from turbolock.asyncio import AsyncRedlockClient

    urls = [server.url for server in three]
    client: Any = RedlockClient(urls, core=core_name, key_prefix=key_prefix, retry_count=0) \
        if front == "threads" else Blocking(lambda: AsyncRedlockClient(urls, core=core_name,
                                                                       key_prefix=key_prefix, retry_count=0))
    try:
        lease = client.try_acquire("quorum", 30)
        assert lease is not None
        assert client.try_acquire("quorum", 30) is None
        assert client.release(lease)
        assert not client.release(lease)
    finally:
        client.close()
    assert recorded.total("turbolock.lock.acquisitions") == 1
    assert recorded.total("turbolock.lock.contended") == 1
    assert recorded.total("turbolock.lock.releases", **{"turbolock.released": "true"}) == 1
    assert recorded.total("turbolock.lock.releases", **{"turbolock.released": "false"}) == 1
    for operation in ("acquire", "release"):
        count, _ = recorded.histogram("turbolock.call.duration", **{"turbolock.operation": operation})
        assert count == 2, f"{operation}: {count} durations for 2 calls"


class _BrokenExemplarFilter:
    """An SDK plug-in with a bug: the SDK lets its error out of ``counter.add()``."""

    def should_sample(self, *args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("exemplar filter broke")


def test_a_failing_metrics_pipeline_never_changes_a_lock_call(
        make_client: Callable[..., Any], raw: redis.Redis, key_prefix: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """The acquire took its lock before reporting it: a report that raised came out of the call,
    and the lock stayed held for its ttl with nobody holding its lease. Reports are guarded now,
    the first failure logged once."""
    client = make_client()
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()],
                             exemplar_filter=_BrokenExemplarFilter())  # type: ignore[arg-type]
    telemetry.instrument(provider)
    try:
        lease = client.try_acquire("boom", 30)
        assert lease is not None and client.release(lease)
        leases = client.acquire_many(["m1", "m2"], 30).acquired
        assert client.release_many(leases) == [True, True]
    finally:
        telemetry.uninstrument()
        provider.shutdown()
    assert raw.exists(key_prefix + "boom", key_prefix + "m1") == 0
    warnings = [r for r in caplog.records if "recording a metric failed" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.parametrize("operation", ["release", "release_many"])
def test_instrumenting_during_a_call_records_no_clock_age(own_server: Any, core_name: str, key_prefix: str,
                                                          operation: str) -> None:
    """A release in flight when ``instrument()`` is called was timed from 0.0 (no sink at its
    start): it recorded the machine's uptime (about 4500 s in the review) as its duration."""
    from turbolock import LockClient

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=10) as client:
            lease = client.try_acquire("inflight", 30)
            assert lease is not None
            done: list[object] = []
            own_server.pause()
            try:
                call = client.release if operation == "release" else lambda one: client.release_many([one])
                thread = threading.Thread(target=lambda: done.append(call(lease)))
                thread.start()
                time.sleep(0.3)  # sent, waiting for its reply
                telemetry.instrument(provider)
            finally:
                own_server.resume()
            thread.join(20)
            assert done and done[0] in (True, [True])
        durations = [point.max for attributes, point in Recorded(reader).points("turbolock.call.duration")
                     if attributes.get("turbolock.operation") == operation]
        assert all(biggest < 60 for biggest in durations), durations
    finally:
        telemetry.uninstrument()
        provider.shutdown()


def test_duration_histograms_resolve_milliseconds(make_client: Callable[..., Any],
                                                  recorded: Recorded) -> None:
    """In seconds, with sub-second bucket boundaries: with the SDK's default ones (0, 5, 10, ...,
    meant for milliseconds) every lock call fell in one bucket and no percentile could be read."""
    client = make_client()
    for i in range(20):
        lease = client.try_acquire(f"h{i}", 30)
        assert lease is not None and client.release(lease)
    _, point = recorded.points("turbolock.call.duration")[0]
    assert list(point.explicit_bounds) == telemetry.SECONDS_BUCKETS
    assert sum(1 for count in point.bucket_counts if count) >= 1 and point.explicit_bounds[0] < 0.001


def test_claims_and_redlock_extends_are_counted(make_client: Callable[..., Any], three: list[Any],
                                                core_name: str, key_prefix: str, recorded: Recorded) -> None:
    """A claim counts the locks it took and the names it found held (it counted nothing); a
    single Redlock extend, and a RedlockLock's, count as extends (they were never reported)."""
    from turbolock import RedlockClient

    client = make_client()
    held = client.try_acquire("c3", 30)
    result = client.acquire_many([f"c{i}" for i in range(10)], 30, limit=4)
    assert len(result.acquired) == 4
    assert recorded.total("turbolock.lock.acquisitions") == 1 + 4
    assert client.release_many(result.acquired) == [True] * 4 and client.release(held)
    with RedlockClient([server.url for server in three], core=core_name, key_prefix=key_prefix,
                       retry_count=0) as redlock:
        lease = redlock.try_acquire("q", 30)
        lock = redlock.lock("q2", 30)
        assert lease is not None and lock.acquire(timeout=0)
        assert redlock.extend(lease, 30) and lock.extend(30)
        lock.release()
        assert redlock.release(lease)
    assert recorded.total("turbolock.lock.extensions", **{"turbolock.extended": "true"}) == 2
    assert recorded.histogram("turbolock.call.duration", **{"turbolock.operation": "extend"})[0] == 2


def test_each_wait_on_a_shared_lock_object_is_recorded(make_client: Callable[..., Any],
                                                       recorded: Recorded) -> None:
    """Two threads (or tasks) sharing one Lock object each wait for it in turn: two samples. The
    start of a wait was kept on the object, so the second overwrote the first's and the first to
    finish cleared it: one sample, of a shorter wait, exactly when the lock was contended."""
    client = make_client()
    holder = client.try_acquire("shared", 30)
    assert holder is not None
    lock = client.lock("shared", 30, timeout=10)
    results: list[bool] = []

    def worker() -> None:
        got = lock.acquire()
        results.append(got)
        if got:
            time.sleep(0.2)
            lock.release()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)  # both are waiting now
    assert client.release(holder)
    for thread in threads:
        thread.join(20)
    assert results == [True, True]
    assert recorded.histogram("turbolock.lock.wait")[0] == 2
