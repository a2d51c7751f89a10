"""What bounds a fenced bulk acquire: the server's CPU per lock for each way to take a lock and
a fence atomically, against a plain ``SET NX PX``.

    python -m benchmarks.fence_server_bound [--quick] [--json PATH]

Starts its own redis-server. Each repeat runs every shape once on the same 100k names (their
locks deleted before each, the per-name counters made by a first pass so every shape increments
existing ones), the order rotating from repeat to repeat, all sent by redis-py with hiredis in
pipelines of 1000 locks so the client is never the bound:

- plain: ``SET key token NX PX ttl`` per lock (no fence: the unfenced acquire's commands);
- transaction: what turbolock sends, one MULTI/EXEC per 1000 locks, the counter every name of
  the prefix shares drawn once (``FENCES_FOR``) and a plain ``SET NX PX`` per lock;
- script, a counter per name: one script call per 1000 locks doing ``SET NX PX`` and ``INCR`` of
  the name's own counter per lock (turbolock's design before the shared counter);
- script, SET only: the same loop without the counter (the floor of any script taking locks);
- MULTI/EXEC, a counter per name: ``SET NX PX`` and ``INCR`` of the name's counter per lock,
  1000 locks per transaction.

The server's CPU is read from ``INFO cpu`` (user + system) around each shape. A fenced shape
can reach at most plain/shape of the plain acquire's rate when the server is the bound, which
the "bound" column gives. Progress goes to stderr, the table to stdout, samples to JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import redis
from redis._parsers import _HiredisParser, _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE

from turbolock._wire import scripts as _scripts
from turbolock._wire.slots import slot_base
from turbolock.bench.workload import KEY_PREFIX, TTL_MS, names
from turbolock.redis_server import RedisServer

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "fence_server_bound.json")
BATCH = 1000

PER_NAME = _scripts.SLOT_BASE + b"""\
local ttl = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local set = redis.pcall('set', key, ARGV[i + 1], 'NX', 'PX', ttl)
  if type(set) == 'table' and set.err then
    out[i] = set
  elseif set then
    local ok, fence = pcall(redis.call, 'incr', slot_base(key) .. ':fence')
    if ok then
      out[i] = fence
    else
      redis.call('del', key)
      out[i] = fence
    end
  else
    out[i] = false
  end
end
return out
"""
"""The fenced bulk script of turbolock before the shared counter (a counter per name), kept here
to measure what the shared counter saved."""

SET_ONLY = b"""\
local ttl = ARGV[1]
local out = {}
for i = 1, #KEYS do
  out[i] = redis.pcall('set', KEYS[i], ARGV[i + 1], 'NX', 'PX', ttl) and 1 or false
end
return out
"""

PLAIN = "plain SET NX PX per lock"
TRANSACTION = "MULTI/EXEC of the shared counter's FENCES_FOR + SET NX PX per lock, 1000 locks (turbolock's)"
SCRIPT = "script of SET NX PX + INCR of the name's counter per lock, one call per 1000 locks"
SET_ONLY_SCRIPT = "script of SET NX PX only, one call per 1000 locks"
MULTI = "MULTI/EXEC of SET NX PX + INCR of the name's counter per lock, 1000 locks"
SHAPES = (PLAIN, TRANSACTION, SCRIPT, SET_ONLY_SCRIPT, MULTI)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _server_cpu(admin: redis.Redis) -> float:
    info = admin.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _shapes(client: redis.Redis, keys: list[bytes]) -> dict[str, Callable[[], int]]:
    """Each shape: sends every lock, returns how many were taken."""
    counters = [slot_base(key) + _scripts.FENCE_SUFFIX for key in keys]
    tokens = [os.urandom(16) for _ in keys]

    def plain() -> int:
        pipe = client.pipeline(transaction=False)
        taken = 0
        for start in range(0, len(keys), BATCH):
            for key, token in zip(keys[start:start + BATCH], tokens[start:start + BATCH], strict=True):
                pipe.execute_command("SET", key, token, "NX", "PX", TTL_MS)
            taken += sum(1 for reply in pipe.execute() if reply)
        return taken

    def script(source: bytes) -> Callable[[], int]:
        def run() -> int:
            sha = client.script_load(source)
            pipe = client.pipeline(transaction=False)
            taken = 0
            for start in range(0, len(keys), BATCH * 8):
                for first in range(start, min(len(keys), start + BATCH * 8), BATCH):
                    chunk = slice(first, first + BATCH)
                    pipe.evalsha(sha, len(keys[chunk]), *keys[chunk], TTL_MS, *tokens[chunk])
                taken += sum(1 for reply in pipe.execute() for one in reply if one)
            return taken
        return run

    def transaction() -> int:
        taken = 0
        counter = _scripts.fence_counter(KEY_PREFIX.encode())
        for start in range(0, len(keys), BATCH):
            pipe = client.pipeline(transaction=True)
            chunk = slice(start, start + BATCH)
            pipe.execute_command("EVAL", _scripts.FENCES_FOR.source, 1, counter, len(keys[chunk]))
            for key, token in zip(keys[chunk], tokens[chunk], strict=True):
                pipe.execute_command("SET", key, token, "NX", "PX", TTL_MS)
            taken += sum(1 for reply in pipe.execute()[1:] if reply)
        return taken

    def multi() -> int:
        taken = 0
        for start in range(0, len(keys), BATCH):
            pipe = client.pipeline(transaction=True)
            chunk = slice(start, start + BATCH)
            for key, counter, token in zip(keys[chunk], counters[chunk], tokens[chunk], strict=True):
                pipe.execute_command("SET", key, token, "NX", "PX", TTL_MS)
                pipe.execute_command("INCR", counter)
            replies = pipe.execute()
            taken += sum(1 for reply in replies[0::2] if reply)
        return taken

    return {PLAIN: plain, TRANSACTION: transaction, SCRIPT: script(PER_NAME),
            SET_ONLY_SCRIPT: script(SET_ONLY), MULTI: multi}


def _table(samples: dict[str, list[float]], count: int, repeats: int) -> str:
    plain = statistics.median(samples[PLAIN])
    lines = [f"The server's CPU per lock ({count:,} locks, {repeats} repeats, medians with min-max):", "",
             "| shape | server CPU per lock | bound: at most this share of the plain acquire's rate |",
             "|---|---:|---:|"]
    for shape in SHAPES:
        values = samples[shape]
        median = statistics.median(values)
        bound = "" if shape == PLAIN else f"{plain / median:.2f}x"
        lines.append(f"| {shape} | {median:.2f} us ({min(values):.2f}-{max(values):.2f}) | {bound} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fence_server_bound",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k locks, 3 repeats")
    parser.add_argument("--json", default=DEFAULT_JSON, metavar="PATH", help=f"default: {DEFAULT_JSON}")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    count, repeats = (20_000, 3) if args.quick else (100_000, 7)
    keys = [(KEY_PREFIX + name).encode() for name in names("bound", count)]
    samples: dict[str, list[float]] = defaultdict(list)
    started = time.monotonic()
    with RedisServer() as server:
        admin = redis.Redis.from_url(server.url)
        client = redis.Redis.from_url(server.url, parser_class=_HiredisParser if HIREDIS_AVAILABLE
                                      else _RESP2Parser)
        shapes = _shapes(client, keys)
        shapes[MULTI]()  # the counters exist from here on, as for names locked before
        order = list(SHAPES)
        for repeat in range(repeats):
            shift = repeat % len(order)
            for shape in order[shift:] + order[:shift]:
                admin.delete(*keys[:count // 2])
                admin.delete(*keys[count // 2:])
                before = _server_cpu(admin)
                taken = shapes[shape]()
                used = _server_cpu(admin) - before
                if taken != count:
                    raise SystemExit(f"{shape}: {count - taken} locks not taken")
                samples[shape].append(used * 1e6 / count)
                progress(f"[{repeat + 1}/{repeats}] {shape:70s} {used * 1e6 / count:.2f} us/lock")
        version = str(admin.info("server")["redis_version"])
        admin.close()
        client.close()
    print(_table(samples, count, repeats))
    meta: dict[str, Any] = {"command": "python -m benchmarks.fence_server_bound", "locks": count,
                            "repeats": repeats, "redis_server": version, "hiredis": HIREDIS_AVAILABLE,
                            "seconds": round(time.monotonic() - started, 1), "load_average": os.getloadavg()}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as out:
        json.dump({"meta": meta, "samples_us_per_lock": samples}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
