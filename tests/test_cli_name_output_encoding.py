"""``turbolock locks list`` / ``inspect`` print a lock name their standard output cannot encode
(a name in another script, stdout a file or pipe in a non-UTF-8 locale: Windows' cp1252 when
redirected, ``LANG=en_US.ISO-8859-1``, ``PYTHONIOENCODING=ascii``) escaped (``\u8ba2``), as
they print unprintable characters. They died with a UnicodeEncodeError traceback (found in
review)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from turbolock import LockClient
from turbolock.redis_server import RedisServer

NAME = "订单-日本"


def _cli(*argv: str, encoding: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONIOENCODING=encoding)
    return subprocess.run([sys.executable, "-m", "turbolock", *argv], capture_output=True, text=True,
                          encoding="utf-8", errors="replace", env=env, timeout=60)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.parametrize("action", ["list", "inspect"])
def test_a_name_the_output_cannot_encode_is_no_traceback(redis_server: RedisServer, key_prefix: str,
                                                        action: str, encoding: str) -> None:
    with LockClient.from_url(redis_server.url, key_prefix=key_prefix) as client:
        lease = client.try_acquire(NAME, 60)
        assert lease is not None
        try:
            extra = [NAME] if action == "inspect" else []
            done = _cli("locks", action, redis_server.url, *extra, "--prefix", key_prefix, encoding=encoding)
        finally:
            client.release(lease)
    assert "Traceback" not in done.stderr, done.stderr[-1500:]
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-800:])
    assert NAME.encode("ascii", "backslashreplace").decode() in done.stdout, done.stdout
