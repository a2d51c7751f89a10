"""``turbolock locks`` keeps its deadline when the server stops answering (SIGSTOP: the port
accepts, nothing replies): each of ``list``, ``inspect`` and ``release --force`` (which now ask
TYPE beside PTTL) ends within its 5 s socket timeout plus start-up, with one line on stderr and
exit 1, never hanging and never a traceback."""

from __future__ import annotations

import time

import pytest

from _cli import run_cli
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # a time budget: run on their own

SOCKET_TIMEOUT = 5.0  # admin.connect's
BUDGET = SOCKET_TIMEOUT + 3.0  # the interpreter's start-up and the URL check besides


@pytest.mark.parametrize("action", [["list"], ["inspect", "job"], ["release", "job", "--force", "--yes"]],
                         ids=["list", "inspect", "release"])
def test_locks_ends_within_its_timeout_on_a_stopped_server(own_server: RedisServer,
                                                          action: list[str]) -> None:
    own_server.pause()
    try:
        started = time.monotonic()
        done = run_cli("locks", action[0], own_server.url, *action[1:], timeout=30)
        took = time.monotonic() - started
    finally:
        own_server.resume()
    assert done.returncode == 1, (took, done.stderr[-800:])
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("turbolock locks"), done.stderr[-800:]
    assert took < BUDGET, f"locks {action[0]} took {took:.1f} s on a stopped server (budget {BUDGET:g} s)"
