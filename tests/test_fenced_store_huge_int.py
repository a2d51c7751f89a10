"""FencedStore / AsyncFencedStore refuse an int value too long to write (CPython turns no int of
more than 4300 digits into a string) with ``InvalidArgumentError`` naming ``value``, before
anything is sent. They took any int: redis-py's hiredis packer (hiredis 3, redis-py's hiredis
extra) then crashed the interpreter with SIGSEGV; without hiredis, a bare ValueError. Found in
review. The calls run in a child process, so that a crash fails the test, not pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from turbolock.redis_server import RedisServer

SRC = os.path.join(os.path.dirname(__file__), "..", "src")

CALLS = {
    "write": "store.write(key, HUGE, 1)",
    "write_many": "store.write_many([(key, 'small', 1), (key + '2', HUGE, 1)])",
    "async-write": "asyncio.run(awrite())",
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_huge_int_value_is_refused_by_name_not_a_crash(redis_server: RedisServer, key_prefix: str,
                                                         call: str) -> None:
    code = textwrap.dedent(f"""
        import asyncio, sys
        import redis, redis.asyncio
        from turbolock import FencedStore, InvalidArgumentError, InvalidArgumentTypeError
        from turbolock.asyncio import AsyncFencedStore
        HUGE = 10 ** 5000
        key = {key_prefix + 'k'!r}
        store = FencedStore(redis.Redis.from_url({redis_server.url!r}))
        async def awrite():
            data = redis.asyncio.Redis.from_url({redis_server.url!r})
            try:
                await AsyncFencedStore(data).write(key, HUGE, 1)
            finally:
                await data.aclose()
        try:
            {CALLS[call]}
        except (InvalidArgumentError, InvalidArgumentTypeError) as exc:
            print("TYPED", exc.argument)
        except Exception as exc:
            print("UNTYPED", type(exc).__module__, type(exc).__name__, str(exc)[:80])
        else:
            print("ACCEPTED")
        print("KEYS", redis.Redis.from_url({redis_server.url!r}).exists(key, key + '2'))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": SRC})
    assert done.returncode == 0, f"the process died (rc {done.returncode}): {done.stderr[-600:]}"
    assert "TYPED value" in done.stdout, done.stdout
    assert "KEYS 0" in done.stdout, f"something was written: {done.stdout}"
