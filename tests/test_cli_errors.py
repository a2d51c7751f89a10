"""The ``turbolock`` command on bad input or a server it cannot use: one clear line on stderr,
exit 1 (the server) or 2 (the input), no traceback, no password, and never a hang: a wrong
password or no server for ``locks``, a user without scripts for ``doctor``, a URL that is not
one for ``bench`` and ``demo`` (whose worker processes once died on it while it waited for them
for good). Found in review: each of these ended in a traceback, or hung."""

from __future__ import annotations

import subprocess

import pytest

from _cli import assert_clean_failure, run_cli
from turbolock.redis_server import RedisServer

PASSWORD = "Rv-Secret-Pa55word"


def _cli(*argv: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, stdin=stdin, timeout=timeout)


def _assert_clean_failure(done: subprocess.CompletedProcess[str], code: int) -> None:
    assert_clean_failure(done, code, PASSWORD)


def test_locks_with_refused_credentials_or_no_server_fails_cleanly() -> None:
    with RedisServer(extra_config=[f"requirepass {PASSWORD}"]) as server:
        port = server.port
        _assert_clean_failure(_cli("locks", "list", f"redis://:wrong-{PASSWORD}@127.0.0.1:{port}/0"), 1)
        _assert_clean_failure(_cli("locks", "inspect", f"redis://127.0.0.1:{port}/0", "job"), 1)
    _assert_clean_failure(_cli("locks", "list", f"redis://:{PASSWORD}@127.0.0.1:{port}/0"), 1)


def test_doctor_with_a_user_not_allowed_info_or_scripts_ends_cleanly() -> None:
    # Without INFO: a note, the rest checked (exit 0); without scripts too: a problem (exit 1).
    with RedisServer(extra_config=[f"user noinfo on >{PASSWORD} ~* &* +@all -info",
                                   f"user noscripts on >{PASSWORD} ~* &* +@all -info -@scripting"]) as server:
        done = _cli("doctor", f"redis://noinfo:{PASSWORD}@127.0.0.1:{server.port}/0")
        assert done.returncode == 0 and "INFO is not allowed" in done.stdout, done.stdout + done.stderr
        assert PASSWORD not in done.stdout + done.stderr and "Traceback" not in done.stderr
        done = _cli("doctor", f"redis://noscripts:{PASSWORD}@127.0.0.1:{server.port}/0")
        assert done.returncode == 1 and "problem  locks:" in done.stdout, done.stdout + done.stderr
        assert PASSWORD not in done.stdout + done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["bench", "demo"])
def test_bench_and_demo_refuse_a_bad_url_before_starting(command: str) -> None:
    with RedisServer() as server:
        for url in (f"http://:{PASSWORD}@127.0.0.1:{server.port}/0",
                    f"redis://:{PASSWORD}@127.0.0.1:{server.port}/x"):  # a live server, a bad db
            options = ["--workers", "1", "--items", "1", "--stock", "1"] if command == "demo" else ["--quick"]
            _assert_clean_failure(_cli(command, "--url", url, *options, timeout=30), 2)


@pytest.mark.parametrize("argv", [
    ["locks", "list", "--limit", "redis://:{pw}@127.0.0.1:6390/0"],  # the number forgotten
    ["demo", "--workers", "redis://user:{pw}@127.0.0.1:6390"],
    ["demo", "--core", "unix:///tmp/redis.sock?password={pw}"],
    ["doctor", "redis://127.0.0.1:6390", "redis://:{pw}@127.0.0.1:6391"],  # one URL too many
])
def test_a_url_refused_by_the_argument_parser_is_not_quoted_with_its_password(argv: list[str]) -> None:
    """argparse quotes what it refuses ("invalid choice: '...'", "unrecognized arguments: ..."):
    found in review quoting a URL's password."""
    done = _cli(*[part.format(pw=PASSWORD) for part in argv])
    assert done.returncode == 2 and ("error: argument" in done.stderr or "unrecognized" in done.stderr)
    assert PASSWORD not in done.stdout + done.stderr and "Traceback" not in done.stderr, done.stderr
