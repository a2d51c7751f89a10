"""Worker bodies for the scenarios; each runs in its own process (forked by the forkserver).

Every worker makes its own ``LockClient`` from the URL and the core name, and its own
redis-py connection for the shared data. Data keys live under ``prefix + "data:"``; lock
names never start with "data:", so locks and data never share a key.

A worker returns a small report (plain dicts and lists) and raises on anything unexpected;
the harness turns a raised error into a test failure with the worker's traceback.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import redis

from turbolock import Lease, LockClient, LockNotAcquiredError

SPIN_LIMIT = 30.0
"""Longest a worker waits for a lock before declaring the scenario stuck."""


def _lock_client(url: str, core: str, prefix: str) -> LockClient:
    return LockClient.from_url(url, core=core, key_prefix=prefix, timeout=10.0)


def _data(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def data_key(prefix: str, *parts: object) -> str:
    return prefix + "data:" + ":".join(str(part) for part in parts)


def _spin_acquire(locks: LockClient, name: str, ttl: float) -> Lease:
    """try_acquire until it succeeds, backing off (capped, jittered) so that waiters on a
    2-core machine leave the CPU to the holder."""
    deadline = time.monotonic() + SPIN_LIMIT
    ceiling = 0.0005
    while True:
        lease = locks.try_acquire(name, ttl)
        if lease is not None:
            return lease
        if time.monotonic() > deadline:
            raise AssertionError(f"could not acquire {name!r} within {SPIN_LIMIT}s")
        time.sleep(random.uniform(0.0, ceiling))
        ceiling = min(0.016, ceiling * 2)


# -- flash sale ------------------------------------------------------------------------------------

def flash_sale_buyer(index: int, url: str, core: str, prefix: str, start: Any) -> dict[str, Any]:
    """Buy one item at a time under the "sale" lock until the stock is gone."""
    stock_key = data_key(prefix, "stock")
    ledger_key = data_key(prefix, "sales")
    sold = 0
    lowest_seen: int | None = None
    lost = 0
    with _lock_client(url, core, prefix) as locks, _data(url) as data:
        start.wait(timeout=SPIN_LIMIT)
        while True:
            lease = _spin_acquire(locks, "sale:item-1", 10)
            try:
                stock = int(data.get(stock_key))
                lowest_seen = stock if lowest_seen is None else min(lowest_seen, stock)
                if stock <= 0:
                    break
                time.sleep(0.0005)  # widen the read-modify-write window a little
                data.set(stock_key, stock - 1)
                data.rpush(ledger_key, index)
                sold += 1
            finally:
                if not locks.release(lease):
                    lost += 1
        implementation = locks.implementation
    return {"sold": sold, "lowest_seen": lowest_seen, "lost_releases": lost, "implementation": implementation}


# -- transfers -------------------------------------------------------------------------------------

def transfer_worker(index: int, url: str, core: str, prefix: str, transfers: int, accounts: int,
                    seed: int, start: Any) -> dict[str, int]:
    """Random transfers between two accounts, both account locks held, taken in id order."""
    rng = random.Random(seed)
    done = skipped = 0
    with _lock_client(url, core, prefix) as locks, _data(url) as data:
        start.wait(timeout=SPIN_LIMIT)
        for _ in range(transfers):
            source, target = rng.sample(range(accounts), 2)
            amount = rng.randint(1, 60)
            first, second = sorted((source, target))
            with locks.lock(f"account:{first}", 10, timeout=SPIN_LIMIT), \
                    locks.lock(f"account:{second}", 10, timeout=SPIN_LIMIT):
                source_balance = int(data.get(data_key(prefix, "balance", source)))
                target_balance = int(data.get(data_key(prefix, "balance", target)))
                if source_balance < amount:
                    skipped += 1
                    continue
                data.set(data_key(prefix, "balance", source), source_balance - amount)
                data.set(data_key(prefix, "balance", target), target_balance + amount)
                # The logs are appended atomically by Redis itself: they are the ground truth.
                data.rpush(data_key(prefix, "log", source), -amount)
                data.rpush(data_key(prefix, "log", target), amount)
                done += 1
    return {"done": done, "skipped": skipped}


# -- scheduled task --------------------------------------------------------------------------------

def scheduled_report_worker(index: int, url: str, core: str, prefix: str, dates: list[str],
                            barrier: Any) -> dict[str, list[str]]:
    """For each date, race the others (released together by the barrier) to run the report."""
    acquired: list[str] = []
    ran: list[str] = []
    with _lock_client(url, core, prefix) as locks, _data(url) as data:
        for date in dates:
            barrier.wait(timeout=SPIN_LIMIT)
            lease = locks.try_acquire(f"report:{date}", 30)
            if lease is None:
                continue
            acquired.append(date)
            try:
                if not data.exists(data_key(prefix, "done", date)):
                    time.sleep(0.005)  # the report takes a while
                    data.incr(data_key(prefix, "runs", date))
                    data.set(data_key(prefix, "done", date), index)
                    ran.append(date)
            finally:
                if not locks.release(lease):
                    raise AssertionError(f"the lock for {date} expired while the report ran")
    return {"acquired": acquired, "ran": ran}


# -- duplicate submission --------------------------------------------------------------------------

def submission_worker(index: int, url: str, core: str, prefix: str, form_id: str, threads: int,
                      barrier: Any) -> list[str]:
    """``threads`` threads submit the same form at the same moment; one client shared by all."""
    outcomes: list[str] = []
    errors: list[BaseException] = []
    guard = threading.Lock()
    with _lock_client(url, core, prefix) as locks, _data(url) as data:

        def submit() -> None:
            try:
                barrier.wait(timeout=SPIN_LIMIT)
                lease = locks.try_acquire(f"submit:{form_id}", 30)
                if lease is None:
                    outcome = "locked-out"
                else:
                    try:
                        if data.exists(data_key(prefix, "processed", form_id)):
                            outcome = "already-processed"
                        else:
                            time.sleep(0.05)  # validating the form takes a while
                            data.rpush(data_key(prefix, "orders"), form_id)
                            data.set(data_key(prefix, "processed", form_id), 1)
                            outcome = "inserted"
                    finally:
                        if not locks.release(lease):
                            raise AssertionError("the submission lock expired during the insert")
                with guard:
                    outcomes.append(outcome)
            except BaseException as exc:
                with guard:
                    errors.append(exc)

        pool = [threading.Thread(target=submit) for _ in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(timeout=SPIN_LIMIT * 2)
    if errors:
        raise errors[0]
    if len(outcomes) != threads:
        raise AssertionError(f"only {len(outcomes)} of {threads} submissions finished")
    return outcomes


# -- expiry race -----------------------------------------------------------------------------------

def expiry_race_taker(index: int, url: str, core: str, prefix: str, name: str, go: Any, acquired: Any,
                      release_now: Any) -> dict[str, Any]:
    """B: once told, take ``name`` as soon as it is free, hold it until told, then release it."""
    with _lock_client(url, core, prefix) as locks:
        go.wait(timeout=SPIN_LIMIT)
        lease = _spin_acquire(locks, name, 30)
        acquired.set()
        if not release_now.wait(timeout=SPIN_LIMIT):
            raise AssertionError("never told to release")
        still_held = locks.check(lease)
        released = locks.release(lease)
    return {"check_before_release": still_held, "released": released}


# -- Lock object: mutual exclusion and waiting ----------------------------------------------------

def counter_worker(index: int, url: str, core: str, prefix: str, iterations: int, use_decorator: bool,
                   start: Any) -> dict[str, Any]:
    """Increment a counter with GET/SET under ``with client.lock(...)`` (or the decorator form),
    counting how often someone else was inside at the same time."""
    counter_key = data_key(prefix, "counter")
    inside_key = data_key(prefix, "inside")
    overlaps = 0
    with _lock_client(url, core, prefix) as locks, _data(url) as data:

        def increment() -> int:
            inside = int(data.incr(inside_key))
            value = int(data.get(counter_key) or 0)
            time.sleep(0.001)
            data.set(counter_key, value + 1)
            data.decr(inside_key)
            return inside

        decorated = locks.lock("counter", 10, timeout=SPIN_LIMIT)(increment)
        start.wait(timeout=SPIN_LIMIT)
        for _ in range(iterations):
            if use_decorator:
                inside = decorated()
            else:
                with locks.lock("counter", 10, timeout=SPIN_LIMIT):
                    inside = increment()
            if inside != 1:
                overlaps += 1
        implementation = locks.implementation
    return {"overlaps": overlaps, "implementation": implementation}


def lock_waiter(index: int, url: str, core: str, prefix: str, name: str, waiting: Any) -> dict[str, Any]:
    """Against a lock the test process holds: a short timeout gives up, a non-blocking try fails,
    and a long wait succeeds once the holder lets go (and not before)."""
    report: dict[str, Any] = {}
    with _lock_client(url, core, prefix) as locks, _data(url) as data:
        try:
            with locks.lock(name, 10, timeout=0.3):
                report["short_timeout"] = "acquired"
        except LockNotAcquiredError as exc:
            report["short_timeout"] = "not-acquired"
            report["short_timeout_message"] = str(exc)
        lock = locks.lock(name, 10)
        report["non_blocking"] = lock.acquire(blocking=False)
        report["owned_after_failed_try"] = lock.owned()
        waiting.set()
        report["long_wait"] = lock.acquire(timeout=SPIN_LIMIT)
        report["released_flag_seen"] = data.get(data_key(prefix, "released")) == b"1"
        report["owned"] = lock.owned()
        lock.release()
        report["owned_after_release"] = lock.owned()
    return report
