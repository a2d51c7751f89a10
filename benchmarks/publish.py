"""The end of a comparison runner: what it ran on, the table, one summary line and the JSON."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import redis

import turbolock
from turbolock.bench.contenders import core_available

from .report import SectionResult, to_json
from .table import render


def run_meta(runner: str, args: Sequence[str], started: float, server_version: str,
             **workload: Any) -> dict[str, Any]:
    """The run's command, times and versions, with ``workload`` (its sizes and repeats)."""
    return {
        "command": " ".join([f"python -m benchmarks.{runner}", *args]),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": round(time.monotonic() - started, 1),
        **workload,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "redis_server": server_version,
        "redis_py": redis.__version__,
        "turbolock": turbolock.__version__,
        "turbolock_c": core_available("c"),
    }


def publish(results: list[SectionResult], samples: Mapping[str, Sequence[float]], meta: Mapping[str, Any],
            path: str, workload: str) -> None:
    """Print the table and a line saying what ran (``workload``: "100,000 locks, 7 repeats"),
    and write everything to ``path``."""
    print(render(results), end="")
    print(f"\n{meta['command']}: {workload} in {meta['seconds']:.0f} s, load average "
          f"{meta['load_average'][0]:.2f}, {meta['cpus']} CPUs; redis-server {meta['redis_server']}, "
          f"redis-py {meta['redis_py']}")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as out:
        json.dump(to_json(results, samples, meta), out, indent=2)
    print(f"wrote {path}", file=sys.stderr, flush=True)
