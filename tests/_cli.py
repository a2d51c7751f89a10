"""The ``turbolock`` command run as its users run it (a process of its own), and the check that
it failed as promised: one line on stderr, the exit code, no traceback, no secret."""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def run_cli(*argv: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m turbolock *argv`` (standard input ``stdin``, else none); killed, with the
    workers it started, after ``timeout`` seconds."""
    process = subprocess.Popen([sys.executable, "-m", "turbolock", *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.PIPE if stdin is not None
                               else subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, err = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        return subprocess.CompletedProcess(process.args, -9, out, err + "\n<hung: killed>")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def assert_clean_failure(done: subprocess.CompletedProcess[str], code: int, secret: str) -> None:
    text = done.stdout + done.stderr
    assert secret not in text
    assert "Traceback" not in text, text[-1200:]
    assert done.returncode == code, text[-1200:]
    assert done.stderr.strip().splitlines()[-1].startswith("turbolock "), done.stderr[-800:]
