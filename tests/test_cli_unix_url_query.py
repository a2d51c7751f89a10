"""README: `from_url` takes `unix:///path/to/socket?db=N`, and every `turbolock` command ends a
failure with one line on stderr, never a traceback. A unix:// URL with any query option (the
documented `?db=0`, or `?password=...`) made every operator command crash with a traceback:
``options.redis_py_url`` rebuilt the URL with ``urlunsplit``, which turns ``unix:///path``
into ``unix:/path``, a URL redis-py refuses (ValueError, not caught by the CLI). Found in review."""

from __future__ import annotations

import pytest
import redis

from _cli import run_cli
from turbolock.options import redis_py_url
from turbolock.redis_server import RedisServer


def test_redis_py_url_keeps_a_unix_url_readable_by_redis_py() -> None:
    url = redis_py_url("unix:///tmp/some/redis.sock?db=0&timeout=1")
    redis.connection.parse_url(url)  # ValueError: "must specify one of the following schemes"


@pytest.mark.parametrize("argv", [["locks", "list"], ["doctor"]], ids=["locks-list", "doctor"])
def test_cli_on_a_unix_url_with_db_query(own_server: RedisServer, argv: list[str]) -> None:
    raw = redis.Redis(unix_socket_path=own_server.unix_socket)
    raw.set("turbolock:held", "x", px=60_000)
    url = f"unix://{own_server.unix_socket}?db=0"
    done = run_cli(*argv, url)
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text[-1500:]
    if argv[0] == "locks":
        assert done.returncode == 0, text[-800:]
        assert "held" in done.stdout
