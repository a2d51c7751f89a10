"""``turbolock bench``: turbolock against redis-py on the user's server, or on a throwaway one."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

import turbolock
from turbolock.options import redis_py_url
from turbolock.redis_server import RedisServer

from .contenders import BenchmarkError, core_available, hiredis_available
from .output import PlotUnavailable, check_plot_target, plot, table
from .run import as_json, measure, summarise
from .suite import FULL, QUICK, WORKLOADS, Sizes, contenders, metrics


@contextmanager
def _server(url: str | None) -> Iterator[str]:
    url = url or os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    server = RedisServer().start()
    print(f"started a throwaway redis-server on port {server.port}", file=sys.stderr)
    try:
        yield server.url
    finally:
        server.stop()


@contextmanager
def _progress(total: int) -> Iterator[Callable[[str], None]]:
    try:
        if not sys.stderr.isatty():
            raise ImportError("a bar is for terminals; a log gets one line per run")
        from tqdm import tqdm
    except ImportError:
        done = [0]

        def line(label: str) -> None:
            done[0] += 1
            print(f"[{done[0]}/{total}] {label}", file=sys.stderr, flush=True)

        yield line
        return
    with tqdm(total=total, unit="run", file=sys.stderr, dynamic_ncols=True, leave=False) as bar:
        started = [0]

        def step(label: str) -> None:
            bar.update(started[0] - bar.n)  # the run before this one has finished
            started[0] += 1
            bar.set_description_str(label[:60])

        yield step
        bar.update(total - bar.n)


def _meta(url: str, core: str, sizes: Sizes, started: float) -> dict[str, Any]:
    server = redis.Redis.from_url(redis_py_url(url))
    try:
        version = str(server.info("server").get("redis_version", "?"))
    finally:
        server.close()
    return {
        "turbolock": turbolock.__version__,
        "core": core, "redis_py": redis.__version__, "hiredis": hiredis_available(),
        "server_version": version, "python": platform.python_version(), "machine": platform.machine(),
        "cpus": os.cpu_count(), "repeats": sizes.repeats, "seconds": round(time.monotonic() - started, 1),
        "sizes": {"pairs": sizes.pairs, "bulk": sizes.bulk, "renewal": sizes.renewal,
                  "contention_seconds": sizes.contention_seconds, "threads": sizes.threads},
    }


def main(url: str | None, core: str | None, quick: bool, repeats: int | None, only: str | None,
         json_path: str | None, plot_path: str | None) -> int:
    core = core or turbolock.implementation
    if not core_available(core):
        print("turbolock bench: the C core is not built here; use --core py", file=sys.stderr)
        return 2
    workloads = tuple(w.strip() for w in only.split(",")) if only else WORKLOADS
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        print(f"turbolock bench: --only: unknown workload {unknown[0]!r} "
              f"(choose from {', '.join(WORKLOADS)})", file=sys.stderr)
        return 2
    if plot_path:
        try:
            check_plot_target(plot_path)
        except PlotUnavailable as exc:
            print(f"turbolock bench: {exc}", file=sys.stderr)
            return 2
    if json_path and json_path != "-":
        try:  # opened for appending, left as it was: a path that cannot be written fails now, not after
            with open(json_path, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            print(f"turbolock bench: --json: cannot write {json_path!r}: {exc.strerror}", file=sys.stderr)
            return 2
    base = QUICK if quick else FULL
    sizes = Sizes(base.pairs, base.bulk, base.renewal, base.contention_seconds, base.threads,
                  repeats or base.repeats)
    started = time.monotonic()
    with _server(url) as server_url:
        built = contenders(server_url, core, sizes, workloads)
        try:
            with _progress(len(built) * sizes.repeats) as step:
                samples = measure(built, sizes.repeats, step)
        except BenchmarkError as exc:
            print(f"turbolock bench: a contender failed its own check: {exc}", file=sys.stderr)
            return 1
        finally:
            for contender in built:
                contender.close()
        meta = _meta(server_url, core, sizes, started)
    results = summarise(built, {w: metrics(sizes)[w] for w in workloads}, samples)
    subtitle = (f"{sizes.repeats} repeats, redis {meta['server_version']}, redis-py {meta['redis_py']}, "
                f"{meta['cpus']} CPUs")
    human = sys.stderr if json_path == "-" else sys.stdout  # stdout is the JSON's alone then
    print(table(results), end="", file=human)
    print(f"\n{subtitle}; 'turbolock is' = turbolock's figure / the row's, paired per repeat", file=human)
    if json_path:
        document = json.dumps(as_json(results, meta), indent=2)
        if json_path == "-":
            print(document)
        else:
            with open(json_path, "w", encoding="utf-8") as out:
                out.write(document + "\n")
    if plot_path:
        plot(results, plot_path, subtitle)
        print(f"plot written to {plot_path}", file=sys.stderr)
    return 0
