"""``turbolock demo --url`` takes every URL the clients take (turbolock's own query options
included: the demo's redis-py connections got them and raised TypeError), and a demo whose buyer
processes fail mid-sale (a user that may SET and GET but not run scripts: every release fails)
ends at once with one line on stderr and exit 1, where it waited five minutes and ended in a
traceback. Found in review."""

from __future__ import annotations

import time

import pytest

from _cli import run_cli
from turbolock.redis_server import RedisServer

PASSWORD = "Demo-Secret-Pa55word"


@pytest.mark.parametrize("query", ["wake_waiters=0", "replicas_ack=0"])
def test_demo_takes_a_url_with_client_options(own_server: RedisServer, query: str) -> None:
    done = run_cli("demo", "--url", f"{own_server.url}?{query}", "--workers", "1", "--items", "1",
                   "--stock", "1", timeout=90)
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text[-1500:]
    assert done.returncode == 0, text[-1500:]


def test_a_demo_whose_buyers_fail_ends_soon_with_one_line() -> None:
    with RedisServer(extra_config=[f"user noscripts on >{PASSWORD} ~* &* +@all -@scripting"]) as server:
        started = time.monotonic()
        done = run_cli("demo", "--url", f"redis://noscripts:{PASSWORD}@127.0.0.1:{server.port}/0",
                       "--workers", "1", "--items", "1", "--stock", "1", timeout=90)
        took = time.monotonic() - started
    text = done.stdout + done.stderr
    assert PASSWORD not in text
    assert done.returncode == 1, (took, text[-1500:])
    assert done.stderr.strip().splitlines()[-1].startswith("turbolock demo"), done.stderr[-800:]
    assert took < 30, f"the demo took {took:.1f} s to notice its buyer had failed"
