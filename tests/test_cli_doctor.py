"""``turbolock doctor URL`` against real servers: a healthy one, an eviction policy that can drop
locks, a user without the scripts' permissions, a replica, a server that is not there, and bad
arguments; the exit code says whether a problem was found, and a password is never printed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from _cli import run_cli
from turbolock import LockClient
from turbolock.cli import main
from turbolock.redis_sentinel import RedisSentinel
from turbolock.redis_server import RedisServer

PASSWORD = "doctor-Secret-Pa55word"


def _doctor(capsys: pytest.CaptureFixture[str], url: str) -> tuple[int, str]:
    code = main(["doctor", url])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_healthy_server_passes_every_check(redis_server: RedisServer) -> None:
    done = subprocess.run([sys.executable, "-m", "turbolock", "doctor", redis_server.url],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    server = "Valkey 8" if os.environ.get("TURBOLOCK_TEST_SERVER") == "valkey" else "Redis 7"
    assert lines[0].startswith("ok") and server in lines[0] and "standalone, master" in lines[0]
    assert any(line.startswith("ok") and "locks:" in line for line in lines)
    assert any(line.startswith("note") and "persistence: none" in line for line in lines)
    assert any(line.startswith("ok") and "waking:" in line for line in lines)
    assert lines[-1] == "0 problems"


@pytest.mark.parametrize(("policy", "problem"), [("volatile-lru", True), ("allkeys-lfu", True),
                                                 ("noeviction", False)])
def test_an_eviction_policy_that_can_drop_locks_is_a_problem(capsys: pytest.CaptureFixture[str], policy: str,
                                                             problem: bool) -> None:
    with RedisServer(extra_config=["maxmemory 100mb", f"maxmemory-policy {policy}"]) as server:
        code, out = _doctor(capsys, server.url)
    eviction = next(line for line in out.splitlines() if "eviction:" in line)
    assert eviction.startswith("problem" if problem else "ok"), out
    assert code == (1 if problem else 0)


def test_a_user_without_the_scripts_permissions_is_a_problem(capsys: pytest.CaptureFixture[str]) -> None:
    acl = f"user narrow on >{PASSWORD} ~* +@all -evalsha -script"
    with RedisServer(extra_config=[acl]) as server:
        code, out = _doctor(capsys, f"redis://narrow:{PASSWORD}@{server.host}:{server.port}/0")
    assert code == 1
    locks = next(line for line in out.splitlines() if "locks:" in line)
    assert locks.startswith("problem") and "NOPERM" in locks.upper(), out
    assert PASSWORD not in out


def test_a_user_without_channels_is_told_its_waiters_poll(capsys: pytest.CaptureFixture[str]) -> None:
    acl = f"user nochannels on >{PASSWORD} ~* +@all resetchannels"
    with RedisServer(extra_config=[acl]) as server:
        code, out = _doctor(capsys, f"redis://nochannels:{PASSWORD}@{server.host}:{server.port}/0")
    assert code == 0, out  # a note, not a problem: locks work, waiters poll
    waking = next(line for line in out.splitlines() if "waking:" in line)
    assert waking.startswith("note") and "no permissions" in waking.lower() and "poll" in waking, out
    assert PASSWORD not in out


def test_a_replica_is_a_problem(capsys: pytest.CaptureFixture[str]) -> None:
    with RedisSentinel(replicas=1, sentinels=0) as group:
        code, out = _doctor(capsys, group.replicas[0].url)
    assert code == 1
    assert any(line.startswith("problem") and "replica" in line for line in out.splitlines()), out


def test_a_server_that_is_not_there_fails_and_hides_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    with RedisServer() as server:
        port = server.port
    code, out = _doctor(capsys, f"redis://:{PASSWORD}@127.0.0.1:{port}/0")
    assert code == 1
    assert out.splitlines()[0].startswith("problem") and "connect" in out
    assert PASSWORD not in out


def test_bad_arguments_exit_2_with_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _doctor(capsys, "http://example.com")
    assert code == 2 and "scheme" in out
    with pytest.raises(SystemExit) as missing:
        main(["doctor"])
    assert missing.value.code == 2
    assert "url" in capsys.readouterr().err


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as shown:
        main(["--help"])
    assert shown.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out and "doctor" in out


def test_doctor_takes_every_url_the_clients_take(redis_server: RedisServer) -> None:
    """A URL whose replicas_timeout fits its own timeout: doctor overrode that timeout with its
    own 5 s, and the URL was then refused as bad input, with no report (found in review)."""
    url = f"redis://127.0.0.1:{redis_server.port}/0?timeout=10&replicas_ack=1&replicas_timeout=6"
    LockClient.from_url(url).close()  # a client takes this URL
    done = run_cli("doctor", url, timeout=60)
    assert done.returncode == 1, done.stderr[-600:]  # a finding (no replica to acknowledge), not bad input
    assert "problem" in done.stdout and "locks" in done.stdout, (done.stdout[-600:], done.stderr[-600:])


@pytest.mark.parametrize("stopped_after", ["_persistence", "_lock_cycle"])
def test_a_server_that_stops_part_way_is_a_problem(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   stopped_after: str) -> None:
    """The server stops between two checks (the real ones run; the server is stopped after the
    one named): a later check's connection error ended in a traceback, or (waking) in a note
    and exit 0, as if the server were healthy."""
    import turbolock.doctor as doctor

    with RedisServer() as server:
        check = getattr(doctor, stopped_after)

        def then_stop(*args: object) -> object:
            found = check(*args)
            server.stop()
            return found

        monkeypatch.setattr(doctor, stopped_after, then_stop)
        code, out = _doctor(capsys, server.url)
    assert code == 1, out
    assert out.splitlines()[-2].startswith("problem") and "part-way" in out, out


MINIMAL_USER = "user locker on >{pw} ~{prefix}* -@all +set +pttl +evalsha +script|load +get +del +pexpire"
"""The README's ACL user with only what its clients need (no INFO, CONFIG GET, PING or channels)."""


def test_the_readmes_minimal_user_passes_with_notes(capsys: pytest.CaptureFixture[str]) -> None:
    # doctor ended at its first INFO with one line, NoPermissionError, and exit 1 (found in review).
    with RedisServer(extra_config=[MINIMAL_USER.format(pw=PASSWORD, prefix="turbolock:")]) as server:
        url = f"redis://locker:{PASSWORD}@{server.host}:{server.port}/0"
        code, out = _doctor(capsys, url)
    assert code == 0, out
    assert PASSWORD not in out
    assert "ok       locks:" in out and "INFO is not allowed" in out and "PING is not allowed" in out


def test_the_lock_checks_run_under_the_prefix_given(capsys: pytest.CaptureFixture[str]) -> None:
    # A user scoped to its clients' own prefix: refused under turbolock:, which doctor used always.
    waking = " +ssubscribe +sunsubscribe +spublish &myapp:*"
    scoped = MINIMAL_USER.format(pw=PASSWORD, prefix="myapp:") + waking
    with RedisServer(extra_config=[scoped]) as server:
        url = f"redis://locker:{PASSWORD}@{server.host}:{server.port}/0"
        code, out = _doctor(capsys, url)
        assert code == 1 and "problem  locks:" in out and "--prefix" in out, out
        code = main(["doctor", url, "--prefix", "myapp:"])
        out = capsys.readouterr().out
        assert code == 0 and "ok       locks:" in out and "ok       waking:" in out, out
        with LockClient.from_url(url, key_prefix="myapp:") as client:
            assert client.query("turbolock-doctor").held is False  # released
    assert main(["doctor", url, "--prefix", "x" * 2000]) == 2
