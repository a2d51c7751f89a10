"""Where turbolock's client time goes, for one core and one path.

    python -m benchmarks.hotpath single|bulk [--core c|py] [--profile]

Default: wall and CPU time per operation against a throwaway redis-server. ``--profile``
prints cProfile's top functions (cProfile inflates cheap calls; read the ranking, not the
absolute times; ``py-spy record -n`` gives undistorted shares). Always against a real server.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import time
from collections.abc import Callable

import redis

from turbolock import LockClient
from turbolock.bench.workload import KEY_PREFIX, TTL_SECONDS, names
from turbolock.redis_server import RedisServer

Job = tuple[Callable[[], None], Callable[[], None]]
"""An untimed set-up, then the timed run."""


def _single(client: LockClient, count: int) -> Job:
    pair_names = names("pair", count)
    acquire, release = client.try_acquire, client.release

    def run() -> None:
        for name in pair_names:
            lease = acquire(name, TTL_SECONDS)
            assert lease is not None and release(lease)

    return (lambda: None), run


def _bulk(client: LockClient, count: int, admin: redis.Redis) -> Job:
    bulk_names = names("bulk", count)

    def run() -> None:
        result = client.acquire_many(bulk_names, TTL_SECONDS)
        assert len(result.acquired) == count

    def setup() -> None:
        admin.flushall()

    return setup, run


def _measure(job: Job, label: str, count: int, repeats: int) -> None:
    setup, run = job
    unit = "pair" if label.startswith("single") else "lock"
    for _ in range(repeats):
        setup()
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{label}: {count / wall:,.0f} {unit}s/s, "
              f"{wall / count * 1e6:.2f} us wall and {cpu / count * 1e6:.2f} us CPU per {unit}")


def _profile(job: Job) -> None:
    setup, run = job
    setup()
    profiler = cProfile.Profile()
    profiler.runcall(run)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hotpath", description=__doc__.split("\n")[0])
    parser.add_argument("path", choices=["single", "bulk"])
    parser.add_argument("--core", choices=["c", "py"], default="c")
    parser.add_argument("--count", type=int, help="pairs (default 5000) or bulk locks (default 100000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile one repeat, top 25 by own time")
    args = parser.parse_args(argv)
    count = args.count or (5000 if args.path == "single" else 100_000)
    label = f"{args.path} {args.core}"
    with RedisServer() as server, redis.Redis(port=server.port) as admin:
        client = LockClient.from_url(server.url, core=args.core, key_prefix=KEY_PREFIX, max_connections=1)
        with client:
            job = _single(client, count) if args.path == "single" else _bulk(client, count, admin)
            if args.profile:
                _profile(job)
            else:
                _measure(job, label, count, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
