"""The operator CLI against real servers (found by review): a `release --force` with no terminal
to answer its question ends with one line on stderr, not a traceback; `locks` and `doctor` take
every URL the clients take (turbolock's own query options included); a fair lock's queue keys
are neither listed nor released; `--limit` counts locks, not the counters scanned past."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
import redis

from _cli import assert_clean_failure, run_cli
from turbolock import LockClient, admin
from turbolock.cli import main
from turbolock.errors import LockNotAcquiredError
from turbolock.redis_server import RedisServer

PASSWORD = "Rv6-Secret-Pa55word"


def _cli(*argv: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, stdin=stdin, timeout=timeout)


def _assert_clean_failure(done: subprocess.CompletedProcess[str], code: int) -> None:
    assert_clean_failure(done, code, PASSWORD)


def test_release_without_yes_and_no_terminal_fails_cleanly(redis_server: RedisServer,
                                                           client: LockClient, key_prefix: str) -> None:
    """A script that forgot --yes (stdin at end of file): one line, exit 1, no traceback."""
    lease = client.try_acquire("stuck", 60)
    assert lease is not None
    done = _cli("locks", "release", redis_server.url, "stuck", "--force", "--prefix", key_prefix)
    _assert_clean_failure(done, 1)
    assert client.check(lease) is not None


@pytest.mark.parametrize("query", ["replicas_ack=1", "wake_waiters=0", "replicas_timeout=0.5"])
def test_locks_list_takes_every_url_the_clients_take(redis_server: RedisServer, client: LockClient,
                                                     key_prefix: str, query: str) -> None:
    """options_from_url (what the CLI checks the URL with) accepts turbolock's own URL options;
    the command must then work, or at least fail cleanly."""
    assert client.try_acquire("job", 30) is not None
    done = _cli("locks", "list", f"{redis_server.url}?{query}", "--prefix", key_prefix)
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text[-1200:]
    assert done.returncode == 0, text[-1200:]
    assert done.stdout.split("\t")[0] == "job"


def test_doctor_takes_every_url_the_clients_take(redis_server: RedisServer) -> None:
    done = _cli("doctor", f"{redis_server.url}?replicas_ack=1")
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text[-1200:]
    assert done.returncode in (0, 1), text[-1200:]


def test_fair_queue_is_neither_listed_nor_released(
        redis_server: RedisServer, client: LockClient, key_prefix: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A fair lock's queue (``<key>:queue``, ``<key>:asked``: under the prefix for a hash-tagged
    name, with a 30 s ttl) is no lock: never listed, never deleted by ``release --force``."""
    raw = redis.Redis.from_url(redis_server.url)
    holder = client.lock("{acct}", 30, fair=True)
    holder.acquire()
    outcome: list[object] = []

    def wait() -> None:
        try:
            with client.lock("{acct}", 30, fair=True, timeout=4):
                outcome.append("got")
        except LockNotAcquiredError as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    try:
        deadline = time.monotonic() + 5
        while not raw.exists(key_prefix + "{acct}:queue") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert raw.exists(key_prefix + "{acct}:queue")
        code = main(["locks", "list", redis_server.url, "--prefix", key_prefix])
        listed = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
        assert code == 0
        inspected = admin.inspect(raw, "{acct}:queue", key_prefix)
        released = admin.force_release(raw, "{acct}:queue", key_prefix)
        assert (listed, inspected, released) == (["{acct}"], None, False)
    finally:
        holder.release()
        waiter.join()
        raw.close()


def test_limit_counts_locks_not_counters(redis_server: RedisServer, client: LockClient, key_prefix: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``--limit 5`` with 5+ locks held shows 5 locks, whatever fence counters share the prefix."""
    for i in range(300):
        lease = client.try_acquire(f"{{c{i}}}", 10, fenced=True)
        assert lease is not None and client.release(lease)
    held = [client.try_acquire(f"held:{i}", 30) for i in range(10)]
    assert all(held)
    code = main(["locks", "list", redis_server.url, "--prefix", key_prefix, "--limit", "5"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and len(out) == 5, out
