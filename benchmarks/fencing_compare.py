"""Fenced bulk acquire against the plain one, in one run on one server: what a fence costs.

    python -m benchmarks.fencing_compare [--quick] [--json PATH]

Starts its own redis-server. Each repeat runs every contender once on the same names (the
server flushed before each), the order rotating from repeat to repeat: turbolock's
``acquire_many`` plain and with ``fenced=True`` (both cores), and redis-py doing the fenced
acquire by hand: the best way we know (what turbolock sends: one MULTI/EXEC transaction per
1000 locks drawing their fences from the prefix's counter, eight transactions per pipelined
execute, with hiredis), and the obvious one (one EVALSHA of the single-lock script per lock, in
chunks of 1000), with hiredis and without. Every lock must be taken and, when fenced, carry a
fence of its own (one counter for all: each grant's fence is new). Progress goes to stderr, the
table to stdout, samples and ratios to JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import redis
from redis._parsers import _HiredisParser, _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE

from turbolock import LockClient
from turbolock._wire import scripts as _scripts
from turbolock.bench.contenders import BenchmarkError, Timing, core_available, timed
from turbolock.bench.workload import CHUNK_SIZE, KEY_PREFIX, TTL_MS, TTL_SECONDS, names
from turbolock.redis_server import RedisServer

from .publish import publish, run_meta
from .report import Comparison, Row, Section, evaluate, key

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "fencing_compare.json")

BULK = "fenced-bulk-acquire"
SERVER = "server-us-per-lock"
PLAIN = {"c": "turbolock acquire_many c", "py": "turbolock acquire_many py"}
FENCED = {"c": "turbolock acquire_many c, fenced", "py": "turbolock acquire_many py, fenced"}
RP_HI = "redis-py pipeline EVALSHA fenced acquire + hiredis"
RP_PURE = "redis-py pipeline EVALSHA fenced acquire, no hiredis"
RP_BATCHED = ("redis-py pipeline, one MULTI/EXEC per 1000 locks"
              + (" + hiredis" if HIREDIS_AVAILABLE else "") + " (hand-written)")

SECTIONS = (
    Section(BULK, "bulk acquire of distinct locks, plain and fenced", "locks/s", (
        Row(FENCED["c"], (Comparison(PLAIN["c"], 0.7), Comparison(RP_BATCHED), Comparison(RP_HI),
                          Comparison(RP_PURE))),
        Row(FENCED["py"], (Comparison(PLAIN["py"], 0.7), Comparison(RP_BATCHED), Comparison(RP_HI),
                           Comparison(RP_PURE))),
        Row(PLAIN["c"]),
        Row(PLAIN["py"]),
        Row(RP_BATCHED),
        Row(RP_HI),
        Row(RP_PURE),
    )),
    Section(SERVER, "the server's time per lock (INFO commandstats: EXEC's usec, or SET's)", "us",
            (Row(FENCED["c"]), Row(PLAIN["c"]), Row(RP_BATCHED)), "{:.2f}"),
)

Step = tuple[str, Callable[[], float]]


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def turbolock_step(url: str, core: str, fenced: bool, lock_names: list[str]) -> Callable[[], float]:
    client = LockClient.from_url(url, core=core, key_prefix=KEY_PREFIX, chunk_size=CHUNK_SIZE)

    def step() -> float:
        result, wall, cpu = timed(lambda: client.acquire_many(lock_names, TTL_SECONDS, fenced=fenced))
        if len(result.acquired) != len(lock_names):
            missing = len(lock_names) - len(result.acquired)
            raise BenchmarkError(f"turbolock {core}: {missing} locks not taken")
        if fenced and not _fresh_fences([lease.fence for lease in result.acquired]):
            raise BenchmarkError(f"turbolock {core}: fences not one new one per lock")
        return Timing(len(lock_names), wall, cpu).rate

    return step


def _fresh_fences(fences: list[Any]) -> bool:
    """One fence per lock, each an int, none twice (the counter every name shares)."""
    return all(type(fence) is int for fence in fences) and len(set(fences)) == len(fences)


COUNTER = _scripts.fence_counter(KEY_PREFIX.encode())


def redis_py_step(url: str, parser: type, lock_names: list[str]) -> Callable[[], float]:
    client = redis.Redis.from_url(url, parser_class=parser)
    keys = [KEY_PREFIX + name for name in lock_names]

    def step() -> float:
        sha = client.script_load(_scripts.FENCED_ACQUIRE.source)  # after the flush

        def run() -> list[Any]:
            replies: list[Any] = []
            pipe = client.pipeline(transaction=False)
            for start in range(0, len(keys), CHUNK_SIZE):
                chunk = slice(start, start + CHUNK_SIZE)
                for key_name in keys[chunk]:
                    pipe.evalsha(sha, 2, key_name, COUNTER, os.urandom(16), TTL_MS)
                replies.extend(pipe.execute())
            return replies

        replies, wall, cpu = timed(run)
        if len(replies) != len(keys) or not _fresh_fences(replies):
            raise BenchmarkError("redis-py: some fenced acquires did not answer a new fence")
        return Timing(len(keys), wall, cpu).rate

    return step


def redis_py_batched_step(url: str, lock_names: list[str]) -> Callable[[], float]:
    """The strongest redis-py shape: what turbolock sends, one MULTI/EXEC per 1000 locks (the
    counter's script, then a SET NX PX per lock), eight per pipelined ``execute()``; each lock's
    fence is the transaction's last minus the locks after it."""
    client = redis.Redis.from_url(url, parser_class=_HiredisParser if HIREDIS_AVAILABLE else _RESP2Parser)
    keys = [KEY_PREFIX + name for name in lock_names]
    batch, per_write = _scripts.KEYS_PER_CALL, 8
    source = _scripts.FENCES_FOR.source

    def step() -> float:
        def run() -> list[Any]:
            fences: list[Any] = []
            pipe = client.pipeline(transaction=False)
            for write in range(0, len(keys), batch * per_write):
                for start in range(write, min(len(keys), write + batch * per_write), batch):
                    chunk = keys[start:start + batch]
                    blob = os.urandom(16 * len(chunk))
                    pipe.execute_command("MULTI")
                    pipe.execute_command("EVAL", source, 1, COUNTER, len(chunk))
                    for i, key_name in enumerate(chunk):
                        pipe.execute_command("SET", key_name, blob[16 * i:16 * i + 16], "NX", "PX", TTL_MS)
                    pipe.execute_command("EXEC")
                for reply in pipe.execute():
                    if type(reply) is list:  # an EXEC's: the last fence, then each SET's
                        last, sets = reply[0], reply[1:]
                        fences += [last - len(sets) + 1 + i if ok else None for i, ok in enumerate(sets)]
            return fences

        fences, wall, cpu = timed(run)
        if len(fences) != len(keys) or not _fresh_fences(fences):
            raise BenchmarkError("redis-py batched: some fenced acquires were not granted a new fence")
        return Timing(len(keys), wall, cpu).rate

    return step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fencing_compare",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k locks, 3 repeats")
    parser.add_argument("--json", default=DEFAULT_JSON, metavar="PATH", help=f"default: {DEFAULT_JSON}")
    args_list = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(args_list)
    count, repeats = (20_000, 3) if args.quick else (100_000, 7)
    lock_names = names("fenced", count)
    started = time.monotonic()
    samples: dict[str, list[float]] = defaultdict(list)
    with RedisServer() as server:
        admin = redis.Redis.from_url(server.url)
        steps: list[Step] = []
        for core in ("c", "py"):
            if core_available(core):
                steps.append((PLAIN[core], turbolock_step(server.url, core, False, lock_names)))
                steps.append((FENCED[core], turbolock_step(server.url, core, True, lock_names)))
        steps.append((RP_BATCHED, redis_py_batched_step(server.url, lock_names)))
        if HIREDIS_AVAILABLE:
            steps.append((RP_HI, redis_py_step(server.url, _HiredisParser, lock_names)))
        steps.append((RP_PURE, redis_py_step(server.url, _RESP2Parser, lock_names)))
        server_version = str(admin.info("server")["redis_version"])
        for repeat in range(repeats):
            shift = repeat % len(steps)
            for label, step in steps[shift:] + steps[:shift]:
                admin.flushall()
                admin.config_resetstat()
                rate = step()
                samples[key(BULK, label)].append(rate)
                if label in (FENCED["c"], PLAIN["c"], RP_BATCHED):
                    # EXEC's usec holds its transaction's commands (each counted again on its own).
                    stats = admin.info("commandstats")
                    top = stats.get("cmdstat_exec") or stats["cmdstat_set"]
                    samples[key(SERVER, label)].append(top["usec"] / count)
                progress(f"[{repeat + 1}/{repeats}] {label:55s} {rate:,.0f}/s")
        admin.close()
    results = evaluate(samples, SECTIONS)
    meta = run_meta(runner="fencing_compare", args=args_list, started=started, server_version=server_version,
                    locks=count, repeats=repeats)
    publish(results, samples, meta, args.json, f"{count:,} locks, {repeats} repeats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
