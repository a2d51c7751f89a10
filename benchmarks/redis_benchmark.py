"""The server's ceiling: ``redis-benchmark`` with one client on the lock commands turbolock sends.

``-c 1 -P 1`` is one round trip per command (its inverse is the round-trip time), and
``-c 1 -P 1000`` is what one pipelined connection can get through the server at best.
Keys are random (``__rand_int__`` over a keyspace much larger than the request count), so
SET NX PX almost always creates a new key, as a bulk acquire of distinct locks does.
The EVALSHA release runs on keys that mostly do not exist: the script's GET misses and it
returns 0 without a DEL, so it is a slight overestimate of a real release's ceiling.
"""

from __future__ import annotations

import csv
import shutil
import subprocess

from turbolock.bench.workload import KEY_PREFIX, TOKEN_BYTES, TTL_MS

KEYSPACE = 1_000_000_000
TOKEN = "t" * TOKEN_BYTES


def available() -> bool:
    return shutil.which("redis-benchmark") is not None


def set_nx_px(kind: str) -> list[str]:
    return ["SET", f"{KEY_PREFIX}{kind}:__rand_int__", TOKEN, "NX", "PX", str(TTL_MS)]


def evalsha(kind: str, sha: str) -> list[str]:
    return ["EVALSHA", sha, "1", f"{KEY_PREFIX}{kind}:__rand_int__", TOKEN]


def requests_per_second(port: int, command: list[str], requests: int, pipeline: int) -> float:
    """Run ``redis-benchmark -c 1 -P pipeline`` on ``command`` and return its requests/s."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "1", "-P", str(pipeline),
            "-n", str(requests), "-r", str(KEYSPACE), "--csv", *command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"redis-benchmark failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return parse_csv(done.stdout)


def parse_csv(output: str) -> float:
    """The ``rps`` column of redis-benchmark's ``--csv`` output (one test)."""
    rows = [row for row in csv.reader(output.splitlines()) if row]
    if len(rows) < 2 or "rps" not in rows[0]:
        raise ValueError(f"unexpected redis-benchmark output: {output[:300]!r}")
    return float(rows[1][rows[0].index("rps")])
