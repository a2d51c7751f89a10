"""Redis Cluster, in one run on one cluster: turbolock's ClusterLockClient (both cores) against
redis-py's RedisCluster as users run it (with hiredis) and without hiredis, and the server's
ceiling.

    python -m benchmarks.cluster_compare [--quick] [--json PATH]

Starts a throwaway cluster (3 masters, 1 replica each, as the issue measured). Each repeat runs
every contender of a section once, the order rotating from repeat to repeat; every master is
flushed before every measurement; all contenders use the same key names, ttl and chunk size.
Sections: acquire+release pairs, sequential (redis-py: ``RedisCluster.lock()``); bulk acquire of
distinct locks (redis-py: its cluster pipeline of ``SET NX PX`` in chunks of 1000, the best it
offers for many keys); the ceiling is three ``redis-benchmark -c 1 -P 1000`` of the same command,
one per master, at once; one auto-renewal round over every held lock, timed on the renewer's
thread (``renewal_contenders.RoundProbe``), against the same round of a ``LockClient`` on one
plain redis-server started for the run, and against redis-py renewing the same locks with one
EVALSHA of turbolock's extend script each, grouped by hand per master (redis-py's cluster
pipeline refuses EVALSHA) on a plain pipeline to each. Progress goes to stderr, the table to
stdout, samples and ratios to JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from redis._parsers import _HiredisParser, _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE

from turbolock._wire import scripts as _scripts
from turbolock._wire.slots import key_slot
from turbolock.bench.contenders import BenchmarkError, Timing, core_available, timed
from turbolock.bench.workload import CHUNK_SIZE, KEY_PREFIX, TTL_MS, TTL_SECONDS, names
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from . import redis_benchmark
from .publish import publish, run_meta
from .renewal_contenders import TurbolockRenewer, core_renews
from .report import Comparison, Row, Section, evaluate, key

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "cluster_compare.json")

TL_C = "turbolock cluster c"
TL_PY = "turbolock cluster py"
RP_HI = "redis-py RedisCluster + hiredis"
RP_PURE = "redis-py RedisCluster, no hiredis"
CEILING = "redis-benchmark -P 1000, one per master"
RT_BOUND = "round-trip bound, one master"
CORES = {TL_C: "c", TL_PY: "py"}
PARSERS = {RP_HI: _HiredisParser, RP_PURE: _RESP2Parser}

RP_HAND = "redis-py SET NX PX + EVALSHA release + hiredis"
SINGLE_C = "turbolock, one plain server, c"
RP_EXTEND = "redis-py per-master pipelines, EVALSHA extend + hiredis"

PAIRS = "cluster-pairs"
BULK = "cluster-bulk-acquire"
RENEW = "cluster-renewal-round"

SECTIONS = (
    Section(PAIRS, "acquire+release pairs on a cluster, sequential (redis-py: RedisCluster.lock())",
            "pairs/s", (
        Row(TL_C, (Comparison(RP_HI, 2.5), Comparison(RP_PURE), Comparison(RP_HAND), Comparison(RT_BOUND))),
        Row(TL_PY, (Comparison(RP_HI), Comparison(RP_PURE, 3.0), Comparison(RP_HAND), Comparison(RT_BOUND))),
        Row(RT_BOUND, (Comparison(RP_HI),)),
        Row(RP_HI),
        Row(RP_PURE),
        Row(RP_HAND),
    )),
    Section(BULK, "bulk acquire of distinct locks on a cluster (redis-py: cluster pipeline)", "locks/s", (
        Row(TL_C, (Comparison(RP_HI, 7.0), Comparison(RP_PURE), Comparison(CEILING, 0.8))),
        Row(TL_PY, (Comparison(RP_HI), Comparison(RP_PURE, 3.0), Comparison(CEILING))),
        Row(RP_HI),
        Row(RP_PURE),
        Row(CEILING),
    )),
    Section(RENEW, "one auto-renewal round over every held lock (redis-py: EVALSHA extend, pipelined per "
                   "master by hand)", "locks/s", (
        Row(TL_C, (Comparison(SINGLE_C, 0.5), Comparison(RP_EXTEND))),
        Row(TL_PY, (Comparison(SINGLE_C), Comparison(RP_EXTEND))),
        Row(SINGLE_C),
        Row(RP_EXTEND),
    )),
)


@dataclass(frozen=True)
class Workload:
    pairs: int
    bulk: int
    repeats: int


DEFAULT = Workload(pairs=2000, bulk=100_000, repeats=5)
QUICK = Workload(pairs=500, bulk=20_000, repeats=3)
"""The renewal round holds ``bulk`` locks too."""

Step = tuple[str, Callable[[], dict[str, float]]]


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class TurbolockCluster:
    def __init__(self, url: str, core: str) -> None:
        self.client = ClusterLockClient.from_url(url, core=core, key_prefix=KEY_PREFIX,
                                                 chunk_size=CHUNK_SIZE)
        self.renewer: TurbolockRenewer | None = None

    def pairs(self, pair_names: list[str]) -> Timing:
        acquire, release = self.client.try_acquire, self.client.release

        def run() -> None:
            for name in pair_names:
                lease = acquire(name, TTL_SECONDS)
                if lease is None or not release(lease):
                    raise BenchmarkError(f"turbolock cluster: {name!r} was not taken and released")

        _, wall, cpu = timed(run)
        return Timing(len(pair_names), wall, cpu)

    def bulk(self, bulk_names: list[str]) -> Timing:
        result, wall, cpu = timed(self.client.acquire_many, bulk_names, TTL_SECONDS)
        if len(result.acquired) != len(bulk_names):
            missing = len(bulk_names) - len(result.acquired)
            raise BenchmarkError(f"turbolock cluster: {missing} locks not taken")
        return Timing(len(bulk_names), wall, cpu)

    def renew_round(self, renew_names: list[str]) -> Timing:
        if self.renewer is None:
            self.renewer = TurbolockRenewer("", "", client=self.client)
        timing, _ = self.renewer.renew_round(renew_names)
        return timing

    def close(self) -> None:
        self.client.close()


class TurbolockServer:
    """A ``LockClient`` on one plain redis-server: the single-server figure the cluster's renewal
    round is held against."""

    def __init__(self, url: str) -> None:
        self.renewer = TurbolockRenewer(url, "c")

    def renew_round(self, renew_names: list[str]) -> Timing:
        timing, _ = self.renewer.renew_round(renew_names)
        return timing

    def flush(self) -> None:
        self.renewer.client._exec.command_one((b"FLUSHALL",), time.monotonic() + 30)

    def close(self) -> None:
        self.renewer.close()


class RedisPyClusterExtend:
    """redis-py (with hiredis) renewing held locks as a user would write it by hand: redis-py's
    cluster pipeline refuses EVALSHA, so the keys are grouped per master (its slot map), and each
    master's connection gets a plain pipeline of one EVALSHA of turbolock's extend script per
    lock, ``CHUNK_SIZE`` per ``execute()``. The locks are taken (untimed) by a turbolock client,
    whose keys and tokens redis-py then renews."""

    def __init__(self, url: str) -> None:
        self.client = redis.RedisCluster.from_url(url, parser_class=_HiredisParser)
        self.taker = ClusterLockClient.from_url(url, key_prefix=KEY_PREFIX, chunk_size=CHUNK_SIZE)
        self.sha = self.client.script_load(_scripts.EXTEND.source)

    def renew_round(self, renew_names: list[str]) -> Timing:
        leases = self.taker.acquire_many(renew_names, TTL_SECONDS).acquired
        if len(leases) != len(renew_names):
            raise BenchmarkError("redis-py cluster extend: the locks to renew were not all taken")
        keys = [KEY_PREFIX.encode() + lease.key for lease in leases]
        tokens = [lease.token for lease in leases]
        sha = self.sha
        nodes = self.client.nodes_manager

        def run() -> list[Any]:
            per_master: dict[str, tuple[Any, list[int]]] = {}
            for i, key_name in enumerate(keys):
                node = nodes.get_node_from_slot(key_slot(key_name))
                per_master.setdefault(node.name, (node, []))[1].append(i)
            replies: list[Any] = []
            for node, indices in per_master.values():
                pipe = node.redis_connection.pipeline(transaction=False)
                for start in range(0, len(indices), CHUNK_SIZE):
                    for i in indices[start:start + CHUNK_SIZE]:
                        pipe.evalsha(sha, 1, keys[i], tokens[i], TTL_MS)
                    replies.extend(pipe.execute())
            return replies

        replies, wall, cpu = timed(run)
        if replies.count(1) != len(keys):
            raise BenchmarkError("redis-py cluster extend: some locks were not renewed")
        return Timing(len(keys), wall, cpu)

    def close(self) -> None:
        self.client.close()
        self.taker.close()


class RedisPyClusterByHand:
    """The best a redis-py user writes by hand for a pair on a cluster (with hiredis): ``SET NX
    PX`` with a random token, then one EVALSHA of turbolock's release script (what ``Lock``
    does, without its object and its thread-local token)."""

    def __init__(self, url: str) -> None:
        self.client = redis.RedisCluster.from_url(url, parser_class=_HiredisParser)
        self.sha = self.client.script_load(_scripts.RELEASE.source)

    def pairs(self, pair_names: list[str]) -> Timing:
        client, sha = self.client, self.sha

        def run() -> None:
            for name in pair_names:
                key_name, token = KEY_PREFIX + name, os.urandom(16)
                if not client.set(key_name, token, nx=True, px=TTL_MS) or client.evalsha(sha, 1, key_name,
                                                                                           token) != 1:
                    raise BenchmarkError(f"redis-py by hand: {name!r} was not taken and released")

        _, wall, cpu = timed(run)
        return Timing(len(pair_names), wall, cpu)

    def close(self) -> None:
        self.client.close()


class RedisPyCluster:
    """redis-py's ``RedisCluster`` with the given reply parser."""

    def __init__(self, url: str, parser: type) -> None:
        self.client = redis.RedisCluster.from_url(url, parser_class=parser)

    def pairs(self, pair_names: list[str]) -> Timing:
        client = self.client

        def run() -> None:
            for name in pair_names:
                lock = client.lock(KEY_PREFIX + name, timeout=TTL_SECONDS)
                if not lock.acquire(blocking=False):
                    raise BenchmarkError(f"redis-py cluster Lock: {name!r} was not taken")
                lock.release()

        _, wall, cpu = timed(run)
        return Timing(len(pair_names), wall, cpu)

    def bulk(self, bulk_names: list[str]) -> Timing:
        keys = [KEY_PREFIX + name for name in bulk_names]

        def run() -> list[Any]:
            replies: list[Any] = []
            pipe = self.client.pipeline()
            for start in range(0, len(keys), CHUNK_SIZE):
                for key_name in keys[start:start + CHUNK_SIZE]:
                    pipe.set(key_name, os.urandom(16), nx=True, px=TTL_MS)
                replies.extend(pipe.execute())
            return replies

        replies, wall, cpu = timed(run)
        if not all(replies):
            raise BenchmarkError("redis-py cluster pipeline: some locks were not taken")
        return Timing(len(keys), wall, cpu)

    def close(self) -> None:
        self.client.close()


def _local_tag(admin: redis.Redis, port: int) -> str:
    """A hash tag whose slot ``port``'s master serves (its keys are local to it)."""
    ranges = [(int(low), int(high)) for low, high, master, *_ in admin.execute_command("CLUSTER", "SLOTS")
              if int(master[1]) == port]
    i = 0
    while not any(low <= key_slot(f"n{i}".encode()) <= high for low, high in ranges):
        i += 1
    return f"n{i}"


def round_trip_bound(cluster: RedisCluster, admin: redis.Redis, requests: int) -> float:
    """Pairs/s no client can beat: one ``SET NX PX`` and one ``EVALSHA`` release round trip
    (``redis-benchmark -c 1 -P 1``, each alone) to the first master, its keys behind its tag."""
    node = cluster.nodes[0]
    tag = "{" + _local_tag(admin, node.port) + "}"
    sha = admin.script_load(_scripts.RELEASE.source)
    rps = redis_benchmark.requests_per_second
    set_rps = rps(node.port, redis_benchmark.set_nx_px(tag), requests, 1)
    evalsha_rps = rps(node.port, redis_benchmark.evalsha(tag, sha), requests, 1)
    return 1.0 / (1.0 / set_rps + 1.0 / evalsha_rps)


def ceiling(cluster: RedisCluster, admin: redis.Redis, requests: int) -> float:
    """Three ``redis-benchmark -c 1 -P 1000 SET NX PX`` at once, one per master (its keys behind a
    hash tag of that master's, with random suffixes): their sum."""
    runs = []
    for node in cluster.nodes[:cluster.masters]:
        command = redis_benchmark.set_nx_px("{" + _local_tag(admin, node.port) + "}")
        argv = ["redis-benchmark", "-h", node.host, "-p", str(node.port), "-c", "1", "-P", "1000",
                "-n", str(requests), "-r", str(redis_benchmark.KEYSPACE), "--csv", *command]
        runs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    total = 0.0
    for run in runs:
        out, err = run.communicate(timeout=300)
        if run.returncode != 0:
            raise BenchmarkError(f"redis-benchmark failed: {err[-300:]}")
        total += redis_benchmark.parse_csv(out)
    return total


class Run:
    def __init__(self, cluster: RedisCluster, server: RedisServer, workload: Workload) -> None:
        self.cluster = cluster
        self.server = server
        self.workload = workload
        self.admins = [redis.Redis(host=node.host, port=node.port)
                       for node in cluster.nodes[:cluster.masters]]
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.contenders: dict[str, Any] = {}

    def flush(self) -> None:
        for admin in self.admins:
            admin.flushall()
        single = self.contenders.get(SINGLE_C)
        if single is not None:
            single.flush()

    def steps(self) -> list[tuple[str, list[Step]]]:
        url = self.cluster.url
        for label, core in CORES.items():
            if core_available(core):
                self.contenders[label] = TurbolockCluster(url, core)
        for label, parser in PARSERS.items():
            if parser is _HiredisParser and not HIREDIS_AVAILABLE:
                progress(f"{label}: n/a (pip install hiredis)")
                continue
            self.contenders[label] = RedisPyCluster(url, parser)
        if HIREDIS_AVAILABLE:
            self.contenders[RP_HAND] = RedisPyClusterByHand(url)
        pair_names = names("pair", self.workload.pairs)
        bulk_names = names("bulk", self.workload.bulk)
        pairs: list[Step] = []
        bulk: list[Step] = []
        for label, contender in self.contenders.items():
            contender.pairs(["warm:0", "warm:1"])

            def pair_step(contender: Any = contender, label: str = label) -> dict[str, float]:
                return {key(PAIRS, label): contender.pairs(pair_names).rate}

            pairs.append((label, pair_step))
            if not hasattr(contender, "bulk"):
                continue

            def bulk_step(contender: Any = contender, label: str = label) -> dict[str, float]:
                return {key(BULK, label): contender.bulk(bulk_names).rate}

            bulk.append((label, bulk_step))
        if redis_benchmark.available():
            def bound_step() -> dict[str, float]:
                bound = round_trip_bound(self.cluster, self.admins[0], 2 * self.workload.pairs)
                return {key(PAIRS, RT_BOUND): bound}

            pairs.append((RT_BOUND, bound_step))

            def ceiling_step() -> dict[str, float]:
                return {key(BULK, CEILING): ceiling(self.cluster, self.admins[0], self.workload.bulk)}

            bulk.append((CEILING, ceiling_step))
        return [("pairs", pairs), ("bulk", bulk), ("renew", self._renewal_steps(url, bulk_names))]

    def _renewal_steps(self, url: str, renew_names: list[str]) -> list[Step]:
        renewers: dict[str, Any] = {label: contender for label, contender in self.contenders.items()
                                    if isinstance(contender, TurbolockCluster) and core_renews(CORES[label])}
        if core_renews("c"):
            renewers[SINGLE_C] = self.contenders[SINGLE_C] = TurbolockServer(self.server.url)
        if HIREDIS_AVAILABLE:
            renewers[RP_EXTEND] = self.contenders[RP_EXTEND] = RedisPyClusterExtend(url)
        steps: list[Step] = []
        for label, contender in renewers.items():
            def renew_step(contender: Any = contender, label: str = label) -> dict[str, float]:
                return {key(RENEW, label): contender.renew_round(renew_names).rate}

            steps.append((label, renew_step))
        return steps

    def measure(self) -> None:
        groups = self.steps()
        repeats = self.workload.repeats
        for repeat in range(repeats):
            for group, steps in groups:
                shift = repeat % len(steps)
                for label, step in steps[shift:] + steps[:shift]:
                    self.flush()
                    for sample_key, value in step().items():
                        self.samples[sample_key].append(value)
                        progress(f"[{repeat + 1}/{repeats}] {group:5s} {label:40s} {value:,.0f}/s")

    def close(self) -> None:
        for contender in self.contenders.values():
            contender.close()
        for admin in self.admins:
            admin.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_compare",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches, 3 repeats")
    parser.add_argument("--json", default=DEFAULT_JSON, metavar="PATH", help=f"default: {DEFAULT_JSON}")
    args_list = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(args_list)
    workload = QUICK if args.quick else DEFAULT
    started = time.monotonic()
    progress(f"cluster benchmarks: {workload.pairs} pairs, {workload.bulk:,} bulk locks, {workload.repeats} "
             "repeats; a throwaway cluster of 3 masters with 1 replica each")
    with RedisCluster(masters=3, replicas=1) as cluster, RedisServer() as server:
        run = Run(cluster, server, workload)
        try:
            server_version = str(run.admins[0].info("server")["redis_version"])
            run.measure()
        finally:
            run.close()
    results = evaluate(run.samples, SECTIONS)
    meta = run_meta("cluster_compare", args_list, started, server_version,
                    workload=dataclasses.asdict(workload))
    publish(results, run.samples, meta, args.json, f"{workload.repeats} repeats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
