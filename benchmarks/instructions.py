"""Instructions per operation, the code before the restructuring (d8e8782) against the code now,
counted by valgrind (cachegrind, no cache simulation) on both cores.

    .venv/bin/python benchmarks/instructions.py [--only W[,W...]] [--cores c,py] [--json PATH]

Wall-clock rates on a shared 2-core VM move by 5-10% between runs (``before_after.py`` shows
it); the instructions a workload executes do not, so a ratio here is what the code itself
costs, whatever else the machine runs. Each workload runs in a fresh process under
``valgrind --tool=cachegrind --cache-sim=no``, once with 1 round and once with 3, and the
difference divided by 2 rounds' operations is the count per operation (start-up, imports and
warm-up cancel out). It counts the client's user-space instructions only: the kernel's work in
send/recv and the server's are not in it, so it speaks of CPU cost, not of latency.

Workloads use the public API only (both trees run them). Needs valgrind (apt-get install
valgrind) and builds the "before" tree as ``before_after.py`` does (/tmp/tl_before). Run it on
a quiet machine all the same: valgrind runs the client about 50 times slower, and on a busy
machine time-dependent paths (a pooled connection idle for over 1 ms is checked with a
``select`` before reuse, calls may time out) run more or less often, which moves a count by a
few percent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import before_after  # noqa: E402  (the "before" tree, its build and the servers)

PYTHON = sys.executable


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    per_round: int
    """Operations per round (what the count is divided by)."""
    body: str
    """Python source run in the worker: ``ROUNDS``, ``CORE`` and ``URLS`` are defined; it runs
    ``ROUNDS`` rounds after its own warm-up."""


SINGLE = """
from turbolock import LockClient
client = LockClient.from_url(URLS[0], core=CORE, key_prefix="ins:", timeout=60, max_connections=1)
client.release(client.try_acquire("warm", 10))
"""

ASYNC_TASKS = """
import asyncio
from turbolock.asyncio import AsyncLockClient

async def main():
    client = AsyncLockClient.from_url(URLS[0], core=CORE, key_prefix="ins:", timeout=60)
    names = [[f"a{{t}}:{{i}}" for i in range(100)] for t in range(64)]
    async def task(mine):
        for name in mine:{pair}
    await asyncio.gather(*(task(mine) for mine in names))
    for _ in range(ROUNDS):
        await asyncio.gather(*(task(mine) for mine in names))
    await client.close()

asyncio.run(main())
"""
"""64 tasks, each doing ``pair`` (indented code using ``client`` and ``name``) over its own names."""

WORKLOADS = [
    Workload("pairs", "try_acquire + release, one connection", 2000, SINGLE + """
names = [f"p{i}" for i in range(2000)]
for _ in range(ROUNDS):
    for name in names:
        client.release(client.try_acquire(name, 10))
"""),
    Workload("lock_pairs", "with client.lock(name, ttl, blocking=False)", 2000, SINGLE + """
names = [f"l{i}" for i in range(2000)]
for _ in range(ROUNDS):
    for name in names:
        with client.lock(name, 10, blocking=False):  # raises if not taken
            pass
"""),
    Workload("bulk", "acquire_many + release_many of 20,000, per lock", 20000, SINGLE + """
names = [f"b{i}" for i in range(20000)]
for _ in range(ROUNDS):
    taken = client.acquire_many(names, 10).acquired
    assert len(taken) == 20000 and all(client.release_many(taken))
"""),
    Workload("extend", "extend_many of 20,000 held, per lock", 20000, SINGLE + """
leases = client.acquire_many([f"e{i}" for i in range(20000)], 60).acquired
assert len(leases) == 20000, "locks left held by an earlier run"
client.extend_many(leases[:10], 60)  # loads the script, which the first run would load alone
for _ in range(ROUNDS):
    assert all(client.extend_many(leases, 60))
client.release_many(leases)
"""),
    Workload("async_pairs", "asyncio try_acquire + release, 64 tasks", 6400, ASYNC_TASKS.format(pair="""
            await client.release(await client.try_acquire(name, 10))""")),
    Workload("async_lock", "asyncio async with client.lock(name, ttl, blocking=False), 64 tasks", 6400,
             ASYNC_TASKS.format(pair="""
            async with client.lock(name, 10, blocking=False):
                pass""")),
    Workload("redlock_pairs", "Redlock try_acquire + release over 3 masters", 1000, """
from turbolock import RedlockClient
client = RedlockClient(URLS[:3], core=CORE, key_prefix="ins:", node_timeout=2)
client.release(client.try_acquire("warm", 10))
names = [f"r{i}" for i in range(1000)]
for _ in range(ROUNDS):
    for name in names:
        client.release(client.try_acquire(name, 10))
client.close()
"""),
    Workload("redlock_bulk", "Redlock acquire_many + release_many of 5,000, 3 masters, per lock", 5000, """
from turbolock import RedlockClient
client = RedlockClient(URLS[:3], core=CORE, key_prefix="ins:", node_timeout=2)
names = [f"rb{i}" for i in range(5000)]
client.release_many(client.acquire_many(names[:100], 10).acquired)
for _ in range(ROUNDS):
    taken = client.acquire_many(names, 10).acquired
    assert len(taken) == 5000 and all(client.release_many(taken))
client.close()
"""),
]


def _script(workload: Workload, rounds: int, core: str, urls: list[str]) -> str:
    head = f"ROUNDS = {rounds}\nCORE = {core!r}\nURLS = {urls!r}\n"
    return head + textwrap.dedent(workload.body)


def _instructions(src: str, source: str, core: str) -> int:
    """User-space instructions of one run of ``source`` with ``src`` first on the path."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write(source)
    env = {**before_after.worker_env(src, core), "PYTHONHASHSEED": "0"}
    try:
        command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                   PYTHON, script.name]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    finally:
        os.unlink(script.name)
    match = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"worker failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(match.group(1).replace(",", ""))


def per_operation(src: str, workload: Workload, core: str, urls: list[str]) -> float:
    """Instructions per operation; a count that is not positive (a run disturbed, e.g. a call
    timing out under valgrind on a busy machine) is measured again, once."""
    for _ in range(2):
        one = _instructions(src, _script(workload, 1, core, urls), core)
        three = _instructions(src, _script(workload, 3, core, urls), core)
        count = (three - one) / (2 * workload.per_round)
        if count > 0:
            return count
    raise RuntimeError(f"{workload.name} ({core}, {src}): no consistent count; run it on a quiet machine")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="workloads, comma-separated: " + ",".join(w.name for w in WORKLOADS))
    parser.add_argument("--cores", default="c,py")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--after", default=before_after.AFTER_SRC,
                        help="the src/ of the code now (default this checkout's; a copy keeps a long run "
                             "apart from edits made meanwhile)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: apt-get install valgrind", file=sys.stderr)
        return 2
    chosen = [w for w in WORKLOADS if args.only is None or w.name in args.only.split(",")]
    cores = args.cores.split(",")
    before_sha = before_after.prepare_before(before_after.BEFORE_DIR, before_after.BEFORE_COMMIT)
    sides = (("before", os.path.join(before_after.BEFORE_DIR, "src")), ("after", os.path.abspath(args.after)))
    servers = before_after.Servers(3)
    rows = []
    try:
        urls = servers.urls
        print(f"{'workload':<15} {'core':<4} {'before':>10} {'after':>10} {'after/before':>12}  per op")
        for workload in chosen:
            for core in cores:
                counts = {side: per_operation(src, workload, core, urls) for side, src in sides}
                ratio = counts["after"] / counts["before"]
                rows.append({"workload": workload.name, "title": workload.title, "core": core, **counts,
                             "ratio": ratio})
                print(f"{workload.name:<15} {core:<4} {counts['before']:>10,.0f} {counts['after']:>10,.0f} "
                      f"{ratio:>11.3f}x  {workload.title}", flush=True)
    finally:
        servers.stop()
    if args.json:
        with open(args.json, "w") as out:
            fingerprint = before_after.tree_fingerprint(os.path.abspath(args.after))
            json.dump({"before": before_sha, "after_head": before_after.git("rev-parse", "HEAD"),
                       "after_fingerprint": fingerprint, "rows": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
