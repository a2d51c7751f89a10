"""``turbolock.redis_server.RedisServer.start`` (a public helper: the demo, the bench,
RedisCluster and RedisSentinel start servers with it): a server that cannot bind its port
(another process listens there) is not reported started (only that *something* accepted on the
port was checked); one that exits at start leaves no directory behind; an interrupt while start()
waits leaves no redis-server running in its own session. Found in review.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat

import pytest

from turbolock.free_ports import claim_free_port
from turbolock.redis_server import SERVER_PORTS, RedisServer, RedisServerError


def test_a_server_that_cannot_bind_its_port_is_not_reported_started() -> None:
    port = claim_free_port(*SERVER_PORTS)
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", port))
    squatter.listen(16)  # another program's listener on the port
    server = RedisServer(port=port)
    try:
        with pytest.raises(RedisServerError):
            server.start()  # observed: returns at once, as if the server were up
    finally:
        server.stop()
        squatter.close()


def test_restart_onto_a_port_taken_meanwhile_is_not_reported_started() -> None:
    server = RedisServer().start()
    squatter = socket.socket()
    try:
        server.stop(remove_directory=False)
        squatter.bind(("127.0.0.1", server.port))
        squatter.listen(16)
        with pytest.raises(RedisServerError):
            server.start()  # what restart() does
    finally:
        server.stop()
        squatter.close()


def test_a_server_that_exits_at_start_leaves_no_directory() -> None:
    server = RedisServer(extra_config=["no-such-directive yes"])
    directory = server.directory
    try:
        with pytest.raises(RedisServerError):
            with server:
                pass
        assert not os.path.exists(directory), f"{directory} left behind by a server that failed to start"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_an_interrupted_start_leaves_no_server_running(tmp_path: object) -> None:
    # A redis-server that takes a second to listen (a slow disk, a loaded machine), and a Ctrl-C meanwhile.
    slow = os.path.join(str(tmp_path), "slow-redis-server")
    with open(slow, "w") as script:
        script.write('#!/bin/sh\nsleep 1\nexec redis-server "$@"\n')
    os.chmod(slow, stat.S_IRWXU)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    server = RedisServer(executable=slow)
    process = None
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            server.start()
        process = server.process
        assert process is None or process.poll() is not None, (
            f"pid {process.pid} still running after the interrupted start(); nothing will stop it")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        server.stop()
