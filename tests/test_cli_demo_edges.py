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
    # One line, the buyer's error in it, and no buyer's traceback before it (found in review).
    assert "Traceback" not in text and len(done.stderr.strip().splitlines()) == 1, done.stderr[-1500:]
    assert "a buyer process failed: " in done.stderr and "NOPERM" in done.stderr, done.stderr


def test_a_buyer_failing_before_the_sale_is_told_at_once_in_one_line() -> None:
    # A user that may write the stock keys but not the lock keys: every buyer fails at its first lock.
    acl = f"user nolocks on >{PASSWORD} ~demo:stock:* ~demo:sold:* +@all"
    with RedisServer(extra_config=[acl]) as server:
        started = time.monotonic()
        done = run_cli("demo", "--url", f"redis://nolocks:{PASSWORD}@127.0.0.1:{server.port}/0",
                       "--workers", "2", "--items", "1", "--stock", "2", timeout=90)
        took = time.monotonic() - started
    assert done.returncode == 1 and PASSWORD not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr[-1500:]
    assert took < 20, f"the demo took {took:.1f} s to tell"
