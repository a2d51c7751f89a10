"""The flash-sale demo: worker processes buy stock under turbolock locks; nothing may be oversold.

Each purchase is a read-modify-write (GET the stock, SET it one lower) that only the lock
makes safe, so an oversold item would mean the lock failed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from turbolock.client import LockClient
from turbolock.errors import ConnectionError, LockError, ReplyError
from turbolock.options import redis_py_url
from turbolock.redis_server import RedisServer

STOCK_KEY = "demo:stock:{}:{}"
SOLD_KEY = "demo:sold:{}:{}"
LOCK_PREFIX = "demo:lock:"
LOCK_NAME = "item:{}:{}"
LOCK_KEY = LOCK_PREFIX + LOCK_NAME
"""A sale's keys, by its run (a random id: two demos on one server keep apart) and item; deleted
when the sale ends, as are its locks."""
START_TIMEOUT = 120.0
"""Seconds for every buyer process to start and connect (a spawned Python imports turbolock)."""
SALE_TIMEOUT = 300.0
"""How long the buyers may take, once started, before the demo gives up on them."""
KEYS_LIVE = int(START_TIMEOUT + SALE_TIMEOUT) + 60
"""Seconds the sale's keys live at most: a demo killed outright (SIGKILL) leaves them that long."""


@dataclass(frozen=True)
class SaleResult:
    items: int
    stock_per_item: int
    sold: int
    stock_left: list[int]
    acquisitions: int
    seconds: float
    implementation: str

    @property
    def oversold(self) -> int:
        negative_stock = sum(-s for s in self.stock_left if s < 0)
        return max(0, self.sold - self.items * self.stock_per_item) + negative_stock

    @property
    def ok(self) -> bool:
        return self.oversold == 0 and self.sold == self.items * self.stock_per_item


Report = tuple[int, int, str]
"""A buyer's (bought, acquisitions, its error in one line or "")."""


def _buyer(url: str, core: str | None, run: str, items: int, seed: int, start: Any,
           out: multiprocessing.Queue[Report]) -> None:
    """One buyer process: its report, or its error in one line, never a traceback of its own (the
    command ends a failure with one line)."""
    try:
        bought, acquisitions = _buy(url, core, run, items, seed, start)
    except BaseException as exc:
        start.abort()  # the parent stops waiting for the sale to start
        out.put((0, 0, f"{type(exc).__name__}: {ReplyError(str(exc))}"))  # a reply's quoted token hidden
        return
    out.put((bought, acquisitions, ""))


def _buy(url: str, core: str | None, run: str, items: int, seed: int, start: Any) -> tuple[int, int]:
    rng = random.Random(seed)
    bought = acquisitions = 0
    open_items = list(range(items))
    with LockClient.from_url(url, core=core, key_prefix=LOCK_PREFIX) as client:
        import redis

        store = redis.Redis.from_url(redis_py_url(url))  # without turbolock's own URL options
        start.wait()
        while open_items:
            item = rng.choice(open_items)
            with client.lock(LOCK_NAME.format(run, item), ttl=5, timeout=30):
                acquisitions += 1
                stock = int(store.get(STOCK_KEY.format(run, item)) or 0)
                if stock <= 0:
                    open_items.remove(item)
                    continue
                # Deliberately read-modify-write (not DECR): only the lock keeps it safe.
                writes = store.pipeline(transaction=False)
                writes.set(STOCK_KEY.format(run, item), stock - 1)
                writes.incr(SOLD_KEY.format(run, item))
                writes.execute()
                bought += 1
        store.close()
    return bought, acquisitions


def _results(procs: list[Any], out: Any, give_up_at: float) -> list[tuple[int, int]]:
    """Every buyer's (bought, acquisitions), as each reports; a buyer that failed (or died
    without reporting) or a sale past ``give_up_at`` raises (``_sell`` then stops the others)."""
    import queue

    results: list[tuple[int, int]] = []
    while len(results) < len(procs):
        try:
            bought, acquisitions, error = out.get(timeout=0.2)
        except queue.Empty:
            error = ""
        else:
            if not error:
                results.append((bought, acquisitions))
                continue
        failed = [proc for proc in procs if proc.exitcode not in (None, 0)]
        late = time.perf_counter() > give_up_at
        if error or failed or late:
            if error:
                raise LockError(f"a buyer process failed: {error}")
            if late:
                raise LockError(f"the sale did not finish within {SALE_TIMEOUT:g} s")
            raise LockError(f"a buyer process died (exit code {failed[0].exitcode})")
    return results


def _sell(url: str, core: str | None, run: str, items: int,
          workers: int) -> tuple[list[tuple[int, int]], float]:
    """The buyers' (bought, acquisitions) and the sale's seconds."""
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[Report] = context.Queue()
    start = context.Barrier(workers + 1)
    procs = [context.Process(target=_buyer, args=(url, core, run, items, seed, start, out))
             for seed in range(workers)]
    try:
        for proc in procs:
            proc.start()
        return _sale(procs, start, out)
    except BaseException:  # a failure, Ctrl-C or SIGTERM: no buyer goes on writing the sale's keys
        for proc in procs:
            if proc.pid is not None:
                proc.kill()
                proc.join()
        raise


def _sale(procs: list[Any], start: Any, out: Any) -> tuple[list[tuple[int, int]], float]:
    try:
        start.wait(timeout=START_TIMEOUT)
    except threading.BrokenBarrierError:  # a worker failed before the sale, or did not start in time
        import queue

        try:
            error = out.get(timeout=1.0)[2]
        except queue.Empty:
            error = ""
        if error:
            raise LockError(f"a buyer process failed: {error}") from None
        raise ConnectionError(f"the buyer processes did not all start within {START_TIMEOUT:g} s") from None
    started = time.perf_counter()
    results = _results(procs, out, started + SALE_TIMEOUT)
    seconds = time.perf_counter() - started
    for proc in procs:
        proc.join()
    return results, seconds


def run_sale(url: str, *, workers: int = 8, items: int = 10, stock: int = 100,
             core: str | None = None) -> SaleResult:
    import redis

    store = redis.Redis.from_url(redis_py_url(url))
    run = secrets.token_hex(4)
    # The sale's own keys, its buyers' locks among them (held by a buyer stopped part-way).
    keys = [key.format(run, item) for item in range(items) for key in (STOCK_KEY, SOLD_KEY, LOCK_KEY)]
    try:
        with store.pipeline() as setting:  # a backstop ttl: a demo killed outright leaves them for that long
            for item in range(items):
                setting.set(STOCK_KEY.format(run, item), stock, ex=KEYS_LIVE)
                setting.set(SOLD_KEY.format(run, item), 0, ex=KEYS_LIVE)  # INCR keeps the ttl
            setting.execute()
        results, seconds = _sell(url, core, run, items, workers)
        stock_left = [int(store.get(STOCK_KEY.format(run, item)) or 0) for item in range(items)]
    except BaseException:
        with contextlib.suppress(redis.RedisError):  # the error that ended the sale is the one to tell
            store.delete(*keys)
        raise
    else:
        store.delete(*keys)  # the sale's own keys: a demo on someone's server leaves nothing behind
    finally:
        store.close()
    with LockClient.from_url(url, core=core) as probe:
        implementation = probe.implementation
    sold = sum(b for b, _ in results)
    acquisitions = sum(a for _, a in results)
    return SaleResult(items, stock, sold, stock_left, acquisitions, seconds,
                      implementation)


def main(url: str | None, workers: int, items: int, stock: int, core: str | None) -> int:
    url = url or os.environ.get("REDIS_URL")
    server = None
    if not url:
        server = RedisServer().start()
        url = server.url
        print(f"started a throwaway redis-server on port {server.port}")
    try:
        result = run_sale(url, workers=workers, items=items, stock=stock, core=core)
    finally:
        if server is not None:
            server.stop()
            print("stopped the throwaway redis-server")
    print(f"core:                 {result.implementation}")
    print(f"workers:              {workers} processes")
    print(f"stock:                {items} items x {stock}")
    print(f"sold:                 {result.sold}")
    print(f"oversold:             {result.oversold}")
    print(f"acquisitions:         {result.acquisitions} in {result.seconds:.2f}s "
          f"({result.acquisitions / result.seconds:,.0f}/s)")
    print("result:               " + ("OK, nothing oversold" if result.ok else "BROKEN INVARIANT"))
    return 0 if result.ok else 1
