"""Every key ``turbolock bench`` writes is named after its run (``suite.RUN``), as the README
promises ("two runs on one server never collide"): the contention workload used one fixed key,
``bench:contention``, so two benches on one server measured each other's hand-offs and waited
for each other's holders. Found in review.
"""

from __future__ import annotations

import threading

import pytest
import redis

from turbolock.bench.suite import contenders
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # key names: no core's own


def test_every_bench_key_is_named_after_its_run(own_server: RedisServer, core_name: str) -> None:
    from turbolock.bench import suite

    sizes = suite.Sizes(pairs=10, bulk=10, renewal=10, contention_seconds=0.2, threads=2, repeats=1)
    built = contenders(own_server.url, core_name, sizes, suite.WORKLOADS)
    data = redis.Redis(port=own_server.port)
    seen: set[bytes] = set()
    try:
        for contender in built:  # the keys sampled while each workload runs

            stop = threading.Event()

            def watch(stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    seen.update(data.scan_iter("bench:*"))

            watcher = threading.Thread(target=watch)
            watcher.start()
            try:
                contender.step()
            finally:
                stop.set()
                watcher.join()
    finally:
        for contender in built:
            contender.close()
    assert seen, "no key seen"
    foreign = sorted(key.decode() for key in seen if suite.RUN not in key.decode())
    assert foreign == [], f"keys without the run id {suite.RUN}: {foreign}"
