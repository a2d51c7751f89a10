"""``turbolock demo --url`` interrupted (SIGINT) stops its buyer processes and exits, before it
deletes the sale's keys. It did not stop them: the interpreter's exit waited for every buyer,
and a buyer mid read-modify-write could write a stock key back after the delete, with no ttl,
selling on the user's server while the "interrupted" command hung. A buyer held up (SIGSTOP)
makes it deterministic. Found in review.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import redis

from turbolock.redis_server import RedisServer


def _buyers(parent: int) -> list[int]:
    found = []
    for child in subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout.split():
        try:
            with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                if b"spawn_main" in cmdline.read():
                    found.append(int(child))
        except OSError:
            pass
    return found


def _sigint_by_default() -> None:
    """In the demo's process before it runs: a test run started in the background
    (``bash .ci/run &``, as the clean-clone CI is) hands its children SIGINT ignored, and Python
    then installs no handler of its own (the clean-clone CI failed so)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_interrupted_demo_stops_its_buyers_and_exits(own_server: RedisServer) -> None:
    data = redis.Redis(port=own_server.port)
    environment = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    process = subprocess.Popen(
        [sys.executable, "-m", "turbolock", "demo", "--url", own_server.url, "--workers", "2",
         "--items", "1", "--stock", "1000000"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        env=environment, start_new_session=True, preexec_fn=_sigint_by_default)
    buyers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not data.info("commandstats").get("cmdstat_incrby"):
            time.sleep(0.05)  # the sale has begun
        buyers = _buyers(process.pid)
        assert len(buyers) == 2, buyers
        for buyer in buyers:
            os.kill(buyer, signal.SIGSTOP)  # busy buyers (or ones between GET and SET)
        process.send_signal(signal.SIGINT)
        try:
            out, _ = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            raise AssertionError("the interrupted demo has not exited 15 s later: it waits for "
                                 "buyers it never stopped") from None
        assert process.returncode == 130, out[-800:]
        alive = [buyer for buyer in buyers if os.path.exists(f"/proc/{buyer}")
                 and open(f"/proc/{buyer}/stat").read().split()[2] != "Z"]
        assert alive == [], f"buyers still running after the demo ended: {alive}"
    finally:
        for buyer in buyers:
            try:
                os.kill(buyer, signal.SIGCONT)
            except OSError:
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        process.wait()
