"""``turbolock locks`` with the names and URLs operators really have: names that are not UTF-8
(looked up as the bytes given), names with tabs and newlines (one line per lock), a limit past
any count, URL options under turbolock's names or misspelt; and a forced release wakes the
lock's waiters as a release does."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from _cli import assert_clean_failure, run_cli
from _eventually import eventually
from _waking import acquire_in_thread, stop_polling
from turbolock import LockClient, admin
from turbolock.redis_server import RedisServer

NOT_UTF8 = b"shard\xff"
AS_ARGUMENT = NOT_UTF8.decode("utf-8", "surrogateescape")  # how Python hands such an argv item over


@pytest.fixture
def binary_lock(client: LockClient) -> Iterator[None]:
    lease = client.try_acquire(NOT_UTF8, 30)
    assert lease is not None
    yield
    client.release(lease)


def test_a_name_that_is_not_utf8_is_found_by_its_bytes(redis_server: RedisServer, key_prefix: str,
                                                       binary_lock: None, raw: redis.Redis) -> None:
    inspected = run_cli("locks", "inspect", redis_server.url, AS_ARGUMENT, "--prefix", key_prefix)
    assert inspected.returncode == 0, inspected.stderr
    assert inspected.stdout.startswith("shard\\xff: held"), inspected.stdout
    listed = run_cli("locks", "list", redis_server.url, "--prefix", key_prefix, "--match", AS_ARGUMENT)
    assert listed.returncode == 0 and listed.stdout.startswith("shard\\xff\t"), listed
    released = run_cli("locks", "release", redis_server.url, AS_ARGUMENT, "--prefix", key_prefix,
                       "--force", "--yes")
    assert released.returncode == 0, released.stderr
    assert raw.exists(key_prefix.encode() + NOT_UTF8) == 0


def test_a_name_with_a_tab_and_a_newline_lists_as_one_line(redis_server: RedisServer, client: LockClient,
                                                           key_prefix: str) -> None:
    lease = client.try_acquire("job\t29.000 s\nshard:1", 30)
    assert lease is not None
    listed = run_cli("locks", "list", redis_server.url, "--prefix", key_prefix)
    client.release(lease)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [listed.stdout.splitlines()[0]]
    assert listed.stdout.startswith("job\\t29.000 s\\nshard:1\t"), listed.stdout


def test_a_limit_past_any_count_lists_everything(redis_server: RedisServer, client: LockClient,
                                                 key_prefix: str) -> None:
    lease = client.try_acquire("one", 30)
    assert lease is not None
    listed = run_cli("locks", "list", redis_server.url, "--prefix", key_prefix, "--limit", str(10**30))
    client.release(lease)
    assert listed.returncode == 0 and listed.stdout.startswith("one\t"), listed


@pytest.mark.parametrize("command", [["doctor"], ["locks", "list"]], ids=["doctor", "locks-list"])
def test_url_options_are_applied_or_refused_in_one_line(redis_server: RedisServer,
                                                        command: list[str]) -> None:
    for query in ("socket_timout=0.5", "foo=bar", "ssl_certfile=/etc/hostname"):
        done = run_cli(*command, f"{redis_server.url}?{query}")
        assert_clean_failure(done, 2, "Traceback")
    done = run_cli(*command, f"{redis_server.url}?timeout=0.5&connect_timeout=0.5")
    assert done.returncode == 0, done.stderr[-600:]


def _subscribed(raw: redis.Redis, channel: str) -> bool:
    return bool(raw.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1])


def test_a_forced_release_wakes_the_waiter(client: LockClient, raw: redis.Redis, key_prefix: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    stop_polling(monkeypatch)  # only a wake-up can hand the lock over within the test
    held = client.try_acquire("forced", 30)
    assert held is not None
    lock = client.lock("forced", 30)
    thread, done = acquire_in_thread(lock, 5)
    assert eventually(lambda: _subscribed(raw, key_prefix + "forced"), 5)
    released = time.monotonic()
    assert admin.force_release(raw, "forced", key_prefix)
    thread.join(6)
    assert done and done[0] - released < 1.0, "the waiter was not woken by the forced release"
    lock.release()
