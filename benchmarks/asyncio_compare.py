"""asyncio clients compared: 64 tasks doing acquire+release pairs on distinct keys, one server, one run.

    python -m benchmarks.asyncio_compare [--quick] [--uvloop] [--tasks N] [--json PATH]

Contenders: turbolock's ``AsyncLockClient`` (c and py cores; functional API and the
``AsyncLock`` object), redis-py's asyncio ``Lock`` as most users run it (with hiredis) and without
hiredis, the best hand-written redis-py code (``SET NX PX`` and an ``EVALSHA`` release, with
hiredis), valkey-glide (SET NX PX + a release script,
the textbook pattern: glide has no lock recipe) and coredis's ``Lock``, the last two when they
are installed. Every contender runs in the same event loop against the same throwaway
redis-server, with the same key names, ttl and task count; each task takes and releases its
own keys in turn for a fixed time. Each repeat measures every contender once, the order
rotating between repeats; the server is flushed before every measurement. Medians, spreads
and ratios taken repeat by repeat; progress on stderr, the table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import redis
from redis.asyncio.connection import _AsyncHiredisParser, _AsyncRESP2Parser
from redis.utils import HIREDIS_AVAILABLE

import turbolock
from turbolock.asyncio import AsyncLockClient
from turbolock.bench.contenders import BenchmarkError, core_available
from turbolock.bench.stats import paired_ratio, summarize
from turbolock.bench.workload import KEY_PREFIX, TOKEN_BYTES, TTL_MS, TTL_SECONDS
from turbolock.redis_server import RedisServer

from .report import Comparison, Row, RowResult, Section, SectionResult
from .table import render

TL_C = "turbolock async c"
TL_PY = "turbolock async py"
TL_C_LOCK = "turbolock async c AsyncLock"
RP_LOCK = "redis-py asyncio Lock + hiredis"
RP_LOCK_PURE = "redis-py asyncio Lock, no hiredis"
RP_SCRIPT = "redis-py asyncio SET NX PX + EVALSHA + hiredis"
"""The best hand-written redis-py approach: one SET NX PX and one EVALSHA of a release script."""
GLIDE = "valkey-glide SET NX PX + script"
COREDIS = "coredis Lock"

PAIRS = "pairs"
CPU = "cpu"

_TARGETS = (Comparison(GLIDE, 3.0), Comparison(RP_LOCK, 5.0), Comparison(RP_LOCK_PURE), Comparison(RP_SCRIPT))
SECTIONS = (
    Section(PAIRS, "acquire+release pairs, concurrent tasks on distinct keys", "pairs/s", (
        Row(TL_C, _TARGETS),
        Row(TL_PY, _TARGETS),
        Row(TL_C_LOCK, (Comparison(GLIDE), Comparison(RP_LOCK))),
        Row(RP_SCRIPT, (Comparison(RP_LOCK),)),
        Row(GLIDE, (Comparison(RP_LOCK),)),
        Row(COREDIS, (Comparison(RP_LOCK),)),
        Row(RP_LOCK, (Comparison(RP_LOCK_PURE),)),
        Row(RP_LOCK_PURE),
    )),
    Section(CPU, "client CPU per pair (process time, all threads)", "us", (
        Row(TL_C, (Comparison(GLIDE), Comparison(RP_LOCK))),
        Row(TL_PY, (Comparison(GLIDE), Comparison(RP_LOCK))),
        Row(TL_C_LOCK),
        Row(RP_SCRIPT),
        Row(GLIDE, (Comparison(RP_LOCK),)),
        Row(COREDIS),
        Row(RP_LOCK),
        Row(RP_LOCK_PURE),
    ), "{:.1f}"),
)

RELEASE_LUA = """\
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


@dataclass(frozen=True)
class Workload:
    tasks: int
    seconds: float
    """How long each measurement runs."""
    keys_per_task: int
    repeats: int


DEFAULT = Workload(tasks=64, seconds=1.5, keys_per_task=500, repeats=7)
QUICK = Workload(tasks=64, seconds=0.5, keys_per_task=200, repeats=3)

Pair = Callable[[str], Awaitable[None]]
"""One acquire+release of the named lock; raises BenchmarkError when the contender misbehaves."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- contenders -------------------------------------------------------------------------------------


class Contender:
    label = ""

    async def open(self, url: str) -> None:
        raise NotImplementedError

    def pair(self) -> Pair:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


class Turbolock(Contender):
    def __init__(self, label: str, core: str) -> None:
        self.label = label
        self.core = core

    async def open(self, url: str) -> None:
        self.client = AsyncLockClient.from_url(url, core=self.core, key_prefix=KEY_PREFIX)

    def pair(self) -> Pair:
        acquire = self.client.try_acquire
        release = self.client.release

        async def pair(name: str) -> None:
            lease = await acquire(name, TTL_SECONDS)
            if lease is None:
                raise BenchmarkError(f"{self.label}: {name} was not acquired")
            if not await release(lease):
                raise BenchmarkError(f"{self.label}: {name} was not released")

        return pair

    async def close(self) -> None:
        await self.client.close()


class TurbolockLock(Turbolock):
    def pair(self) -> Pair:
        client = self.client

        async def pair(name: str) -> None:
            async with client.lock(name, TTL_SECONDS, blocking=False):
                pass

        return pair


class RedisPyLock(Contender):
    def __init__(self, label: str, parser: type[_AsyncRESP2Parser] | type[_AsyncHiredisParser]) -> None:
        self.label = label
        self.parser = parser

    async def open(self, url: str) -> None:
        import redis.asyncio

        self.client = redis.asyncio.Redis.from_url(url, parser_class=self.parser)

    def pair(self) -> Pair:
        client = self.client

        async def pair(name: str) -> None:
            lock = client.lock(KEY_PREFIX + name, timeout=TTL_SECONDS, blocking=False)
            if not await lock.acquire():
                raise BenchmarkError(f"{self.label}: {name} was not acquired")
            await lock.release()

        return pair

    async def close(self) -> None:
        await self.client.aclose()


class RedisPyScript(Contender):
    label = RP_SCRIPT

    async def open(self, url: str) -> None:
        import redis.asyncio

        self.client = redis.asyncio.Redis.from_url(url, parser_class=_AsyncHiredisParser)
        self.sha = await self.client.script_load(RELEASE_LUA)

    def pair(self) -> Pair:
        client, sha = self.client, self.sha

        async def pair(name: str) -> None:
            key, token = KEY_PREFIX + name, os.urandom(TOKEN_BYTES)
            if not await client.set(key, token, nx=True, px=TTL_MS):
                raise BenchmarkError(f"{self.label}: {name} was not acquired")
            if not await client.evalsha(sha, 1, key, token):
                raise BenchmarkError(f"{self.label}: {name} was not released")

        return pair

    async def close(self) -> None:
        await self.client.aclose()


class Glide(Contender):
    label = GLIDE

    async def open(self, url: str) -> None:
        import glide

        host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        config = glide.GlideClientConfiguration([glide.NodeAddress(host, int(port))])
        self.glide = glide
        self.client = await glide.GlideClient.create(config)
        self.script = glide.Script(RELEASE_LUA)  # type: ignore[no-untyped-call]

    def pair(self) -> Pair:
        glide = self.glide
        client = self.client
        script = self.script
        nx = glide.ConditionalChange.ONLY_IF_DOES_NOT_EXIST
        px = glide.ExpirySet(glide.ExpiryType.MILLSEC, TTL_MS)

        async def pair(name: str) -> None:
            key = KEY_PREFIX + name
            token = os.urandom(TOKEN_BYTES)
            if await client.set(key, token, conditional_set=nx, expiry=px) != "OK":
                raise BenchmarkError(f"{self.label}: {name} was not acquired")
            if await client.invoke_script(script, keys=[key], args=[token]) != 1:
                raise BenchmarkError(f"{self.label}: {name} was not released")

        return pair

    async def close(self) -> None:
        await self.client.close()


class Coredis(Contender):
    label = COREDIS

    async def open(self, url: str) -> None:
        import coredis
        from coredis.patterns.lock import Lock

        self.lock_class = Lock
        self.client = coredis.Redis.from_url(url)
        # coredis 5+ clients live inside their own async context (anyio task groups).
        self.context = self.client.__aenter__()
        await self.context

    def pair(self) -> Pair:
        client = self.client
        lock_class = self.lock_class

        async def pair(name: str) -> None:
            lock = lock_class(client, KEY_PREFIX + name, timeout=TTL_SECONDS, blocking=False)
            if not await lock.acquire():
                raise BenchmarkError(f"{self.label}: {name} was not acquired")
            await lock.release()

        return pair

    async def close(self) -> None:
        await self.client.__aexit__(None, None, None)


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def contenders() -> list[Contender]:
    found: list[Contender] = []
    if core_available("c"):
        found += [Turbolock(TL_C, "c"), TurbolockLock(TL_C_LOCK, "c")]
    else:
        progress(f"{TL_C}: n/a (the compiled core turbolock._core_c does not import)")
    found.append(Turbolock(TL_PY, "py"))
    if HIREDIS_AVAILABLE:
        found += [RedisPyLock(RP_LOCK, _AsyncHiredisParser), RedisPyScript()]
    else:
        progress(f"{RP_LOCK}, {RP_SCRIPT}: n/a (pip install hiredis)")
    found.append(RedisPyLock(RP_LOCK_PURE, _AsyncRESP2Parser))
    for module, contender in (("glide", Glide), ("coredis", Coredis)):
        if _installed(module):
            found.append(contender())
        else:
            progress(f"{contender.label}: n/a ({module} is not installed)")
    return found


# -- measuring --------------------------------------------------------------------------------------


async def measure(pair: Pair, workload: Workload) -> tuple[float, float]:
    """Pairs per second and client CPU microseconds per pair over ``workload.seconds``."""
    loop = asyncio.get_running_loop()
    names = [[f"apair:{task:03d}:{i:06d}" for i in range(workload.keys_per_task)]
             for task in range(workload.tasks)]
    stop_at = 0.0
    done = [0] * workload.tasks

    async def worker(task: int) -> None:
        mine = names[task]
        count = 0
        while loop.time() < stop_at:
            for name in mine:
                await pair(name)
                count += 1
                if count % 16 == 0 and loop.time() >= stop_at:
                    break
        done[task] = count

    cpu = time.process_time()
    start = time.perf_counter()
    stop_at = loop.time() + workload.seconds
    await asyncio.gather(*(worker(task) for task in range(workload.tasks)))
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    pairs = sum(done)
    return pairs / wall, cpu / pairs * 1e6


async def run(url: str, workload: Workload, admin: redis.Redis) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = defaultdict(list)
    opened: list[Contender] = []
    try:
        for contender in contenders():
            try:
                await contender.open(url)
            except Exception as exc:  # an optional contender that cannot run is reported, not fatal
                progress(f"{contender.label}: n/a ({type(exc).__name__}: {exc})")
                continue
            opened.append(contender)
            await measure(contender.pair(), Workload(workload.tasks, 0.2, 8, 1))  # warm-up
        for repeat in range(workload.repeats):
            shift = repeat % len(opened)
            for contender in opened[shift:] + opened[:shift]:
                admin.flushall()
                rate, cpu_us = await measure(contender.pair(), workload)
                samples[f"{PAIRS}/{contender.label}"].append(rate)
                samples[f"{CPU}/{contender.label}"].append(cpu_us)
                progress(f"[{repeat + 1}/{workload.repeats}] {contender.label:34s} {rate:>9,.0f} pairs/s "
                         f"{cpu_us:6.1f} us CPU per pair")
    finally:
        for contender in opened:
            await contender.close()
    return samples


def evaluate(samples: dict[str, list[float]]) -> list[SectionResult]:
    from .report import RatioResult

    results = []
    for section in SECTIONS:
        rows = []
        for row in section.rows:
            values = samples.get(f"{section.name}/{row.contender}", [])
            ratios = [RatioResult(c.baseline,
                                  paired_ratio(values, samples.get(f"{section.name}/{c.baseline}", [])),
                                  c.target)
                      for c in row.comparisons]
            if section.name == CPU:  # lower is better: the ratio says how many times less CPU
                ratios = [RatioResult(r.baseline, paired_ratio(samples.get(f"{CPU}/{r.baseline}", []),
                                                               values), r.target) for r in ratios]
            rows.append(RowResult(row.contender, summarize(values), ratios))
        results.append(SectionResult(section, rows))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.asyncio_compare",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="0.5 s measurements, 3 repeats (about 20 s)")
    parser.add_argument("--uvloop", action="store_true", help="run every contender on uvloop")
    parser.add_argument("--tasks", type=int, default=None, help="concurrent tasks (default 64)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write samples and results here")
    args_list = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(args_list)
    workload = QUICK if args.quick else DEFAULT
    if args.tasks is not None:
        workload = Workload(args.tasks, workload.seconds, workload.keys_per_task, workload.repeats)
    started = time.monotonic()
    loop_name = "uvloop" if args.uvloop else "asyncio"
    progress(f"asyncio benchmarks: {workload.tasks} tasks, {workload.seconds:g} s per measurement, "
             f"{workload.repeats} repeats, {loop_name} loop; a throwaway redis-server")
    with RedisServer() as server:
        admin = redis.Redis.from_url(server.url)
        try:
            version = str(admin.info("server")["redis_version"])
            if args.uvloop:
                import uvloop

                samples = uvloop.run(run(server.url, workload, admin))
            else:
                samples = asyncio.run(run(server.url, workload, admin))
        finally:
            admin.close()
    results = evaluate(samples)
    print(render(results), end="")
    command = " ".join(["python -m benchmarks.asyncio_compare", *args_list])
    print(f"\n{command}: {workload.repeats} repeats in "
          f"{time.monotonic() - started:.0f} s, {loop_name} loop, load average {os.getloadavg()[0]:.2f}, "
          f"{os.cpu_count()} CPUs; redis-server {version}; python {platform.python_version()}")
    if args.json:
        meta = {"command": command, "loop": loop_name,
                "workload": workload.__dict__, "redis_server": version, "cpus": os.cpu_count(),
                "turbolock": turbolock.__version__}
        with open(args.json, "w") as out:
            json.dump({"meta": meta, "samples": samples}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
