"""The ``turbolock`` command on bad input or a server it cannot use: one clear line on stderr,
exit 1 (the server) or 2 (the input), no traceback, no password, and never a hang: a wrong
password or no server for ``locks``, a user without ``+info`` for ``doctor``, a URL that is not
one for ``bench`` and ``demo`` (whose worker processes once died on it while it waited for them
for good). Found in review: each of these ended in a traceback, or hung."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from turbolock.redis_server import RedisServer

PASSWORD = "Rv-Secret-Pa55word"


def _cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen([sys.executable, "-m", "turbolock", *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the command and the workers it started
        out, err = process.communicate()
        return subprocess.CompletedProcess(process.args, -9, out, err + "\n<hung: killed>")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _assert_clean_failure(done: subprocess.CompletedProcess[str], code: int) -> None:
    text = done.stdout + done.stderr
    assert PASSWORD not in text
    assert "Traceback" not in text, text[-800:]
    assert done.returncode == code, text[-800:]
    assert done.stderr.strip().splitlines()[-1].startswith("turbolock "), done.stderr[-800:]


def test_locks_with_refused_credentials_or_no_server_fails_cleanly() -> None:
    with RedisServer(extra_config=[f"requirepass {PASSWORD}"]) as server:
        port = server.port
        _assert_clean_failure(_cli("locks", "list", f"redis://:wrong-{PASSWORD}@127.0.0.1:{port}/0"), 1)
        _assert_clean_failure(_cli("locks", "inspect", f"redis://127.0.0.1:{port}/0", "job"), 1)
    _assert_clean_failure(_cli("locks", "list", f"redis://:{PASSWORD}@127.0.0.1:{port}/0"), 1)


def test_doctor_with_a_user_not_allowed_info_fails_cleanly() -> None:
    with RedisServer(extra_config=[f"user noinfo on >{PASSWORD} ~* +@all -info"]) as server:
        _assert_clean_failure(_cli("doctor", f"redis://noinfo:{PASSWORD}@127.0.0.1:{server.port}/0"), 1)


@pytest.mark.parametrize("command", ["bench", "demo"])
def test_bench_and_demo_refuse_a_bad_url_before_starting(command: str) -> None:
    with RedisServer() as server:
        for url in (f"http://:{PASSWORD}@127.0.0.1:{server.port}/0",
                    f"redis://:{PASSWORD}@127.0.0.1:{server.port}/x"):  # a live server, a bad db
            options = ["--workers", "1", "--items", "1", "--stock", "1"] if command == "demo" else ["--quick"]
            _assert_clean_failure(_cli(command, "--url", url, *options, timeout=30), 2)
