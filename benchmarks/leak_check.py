"""Memory over a million lock operations on each core: does it stay flat (RSS and tracemalloc)?

    python -m benchmarks.leak_check [--ops 1000000] [--samples 100] [--cores c,py] [--json PATH]

Starts its own redis-server. Each core runs ``--ops`` lock operations (a lock acquired, extended or
released counts one) in ``--samples`` equal rounds, each round two fifths acquire+release pairs
(``try_acquire`` then ``release``) and three fifths bulk calls (``acquire_many``, ``extend_many``,
``release_many`` of the same locks). After each round, garbage collected, it samples the process's
resident memory (RSS: the C core's own buffers and hiredis's included) and what tracemalloc counts
(every Python object, the C core's replies among them). The first quarter of the run is warm-up;
after it, the least-squares slope of each series must stay under its limit (``LIMITS``). The exit
status is 1 when a series is not flat.

``--inject-leak python|native`` keeps ``--leak-bytes`` per operation alive on purpose (a Python
bytes object, or a malloc'd block touched and never freed): the negative control, which must be
reported as a leak (tests/test_leak_check.py runs both on a short run).
"""

from __future__ import annotations

import argparse
import array
import ctypes
import gc
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from turbolock import LockClient
from turbolock.bench.contenders import core_available
from turbolock.redis_server import RedisServer

from .flatness import Flatness, flatness

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "leak_check.json")
TTL_SECONDS = 60
# Bytes per 1000 operations. tracemalloc counts exactly: one object of the smallest size (16 bytes)
# kept per 1000 operations is more than this. RSS moves by whole pages and allocator arenas: a leak
# of a megabyte per million operations is more than this.
LIMITS = {"tracemalloc": 16.0, "rss": 1024.0}
_PAGE = os.sysconf("SC_PAGE_SIZE")


class Rss:
    """The process's resident memory, read from a descriptor kept open: each open() of a text file
    leaves about 67 bytes that tracemalloc counts, which would be the runner's own growth."""

    def __init__(self) -> None:
        self.fd = os.open("/proc/self/statm", os.O_RDONLY)

    def __call__(self) -> int:
        return int(os.pread(self.fd, 256, 0).split()[1]) * _PAGE

    def close(self) -> None:
        os.close(self.fd)


class Leak:
    """The negative control: memory kept per operation, never given back."""

    def __init__(self, kind: str | None, bytes_per_op: int) -> None:
        self.kind, self.bytes_per_op = kind, bytes_per_op
        self.kept: list[object] = []
        self.libc = ctypes.CDLL(None) if kind == "native" else None
        if self.libc is not None:
            self.libc.malloc.restype = ctypes.c_void_p
            self.libc.malloc.argtypes = [ctypes.c_size_t]

    def add(self, ops: int) -> None:
        size = ops * self.bytes_per_op
        if self.kind == "python":
            self.kept.append(bytes(size))
        elif self.libc is not None:
            block = self.libc.malloc(size)
            ctypes.memset(block, 1, size)  # touched, so resident


def round_of(client: LockClient, ops: int, tag: str) -> Callable[[int], int]:
    """One round of ``ops`` operations (2/5 in pairs, 3/5 in bulk calls); returns the ops done."""
    pairs = max(1, ops // 5)
    bulk = max(1, ops // 5)

    def run(number: int) -> int:
        for i in range(pairs):
            lease = client.try_acquire(f"{tag}:pair:{i % 64}", TTL_SECONDS)
            if lease is None or not client.release(lease):
                raise RuntimeError("a pair's lock was not free, or not released")
        result = client.acquire_many([f"{tag}:bulk:{number}:{i}" for i in range(bulk)], TTL_SECONDS)
        if len(result.acquired) != bulk:
            raise RuntimeError(f"only {len(result.acquired)} of {bulk} bulk locks were taken")
        if not all(client.extend_many(result.acquired, TTL_SECONDS)):
            raise RuntimeError("a bulk lock was not extended")
        if not all(client.release_many(result.acquired)):
            raise RuntimeError("a bulk lock was not released")
        return 2 * pairs + 3 * bulk

    return run


def measure(url: str, core: str, ops: int, samples: int, leak: Leak) -> dict[str, Any]:
    """Run ``ops`` operations on ``core`` and sample memory after every round."""
    # Filled in place: growing lists of new ints would be traced growth of the runner's own.
    series = {name: array.array("q", bytes(8 * samples)) for name in ("ops", "rss", "tracemalloc")}
    started = time.monotonic()
    rss = Rss()
    with LockClient.from_url(url, core=core, key_prefix=f"leak:{os.getpid()}:") as client:
        step = round_of(client, ops // samples, core)
        tracemalloc.start()
        try:
            done = 0
            for number in range(samples):
                made = step(number)
                leak.add(made)
                done += made
                gc.collect()
                series["ops"][number] = done
                series["rss"][number] = rss()
                series["tracemalloc"][number] = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
            rss.close()
    lists = {name: values.tolist() for name, values in series.items()}
    return {"core": core, "seconds": round(time.monotonic() - started, 1), **lists}


def verdicts(run: dict[str, Any]) -> dict[str, Flatness]:
    return {name: flatness(run["ops"], run[name], limit) for name, limit in LIMITS.items()}


def report(runs: list[dict[str, Any]]) -> bool:
    """Print one line per core and series; True when every series is flat."""
    print("| core | memory | after warm-up (ops) | growth since | slope, bytes/1000 ops | limit | flat |")
    print("|---|---|---:|---:|---:|---:|---|")
    all_flat = True
    for run in runs:
        for name, verdict in verdicts(run).items():
            all_flat &= verdict.flat
            print(f"| {run['core']} | {name} | {verdict.warm_up_ops:,} | {verdict.growth:+,} B | "
                  f"{verdict.slope:+,.2f} | {verdict.limit:,.0f} | {'yes' if verdict.flat else 'NO'} |")
    return all_flat


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=1_000_000, help="lock operations per core")
    parser.add_argument("--samples", type=int, default=100, help="rounds, each followed by a sample")
    parser.add_argument("--cores", default="c,py", help="comma-separated: c, py")
    parser.add_argument("--json", default=DEFAULT_JSON, help="where the samples are written")
    parser.add_argument("--inject-leak", choices=["python", "native"], help="the negative control")
    parser.add_argument("--leak-bytes", type=int, default=64, help="bytes kept per operation")
    args = parser.parse_args(argv)
    cores = [core for core in args.cores.split(",") if core != "c" or core_available("c")]
    if cores != args.cores.split(","):
        print("the compiled core is not built: running the pure core only", file=sys.stderr)
    runs = []
    with RedisServer() as server:
        for core in cores:
            leak = Leak(args.inject_leak, args.leak_bytes)
            runs.append(measure(server.url, core, args.ops, args.samples, leak))
            print(f"{core}: {runs[-1]['ops'][-1]:,} operations in {runs[-1]['seconds']} s", file=sys.stderr)
    flat = report(runs)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as out:
        json.dump({"command": " ".join(["python -m benchmarks.leak_check", *(argv or sys.argv[1:])]),
                   "limits": LIMITS, "runs": runs}, out)
    print("memory is flat" if flat else "memory GROWS: see the rows marked NO")
    return 0 if flat else 1


if __name__ == "__main__":
    sys.exit(main())
