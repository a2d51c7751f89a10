"""``turbolock bench --url`` with one of turbolock's own URL query options (``timeout``,
``wake_waiters``, ``replicas_ack``: the URL check accepts them, and ``turbolock demo`` was fixed to
take them): bench handed the raw URL to redis-py, whose connections raised ``TypeError: ...
unexpected keyword argument`` mid-run, ending in a traceback (found in review). README: every
command "checks its URL before it starts anything, and ends a failure with one line on stderr
(never a traceback...)"."""

from __future__ import annotations

import pytest

from _cli import run_cli
from turbolock.redis_server import RedisServer


@pytest.mark.parametrize("query", ["timeout=3", "wake_waiters=0", "replicas_ack=0"])
def test_bench_takes_a_url_with_client_options(own_server: RedisServer, query: str) -> None:
    done = run_cli("bench", "--url", f"{own_server.url}?{query}", "--quick", "--only", "pairs",
                   "--repeats", "1", timeout=120)
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text[-1500:]
    assert done.returncode == 0, text[-1500:]
