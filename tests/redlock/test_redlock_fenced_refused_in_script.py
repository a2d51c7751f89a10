"""A fenced Redlock acquire on masters whose ACL user may not run a command of the fenced
acquire's script (TIME, which the README says a fenced acquire needs): Redis 7.0 answers the
script with ``ERR The user executing the script can't run this command ...``, not ``NOPERM``.
Those masters are refusals too: a blocking acquire raises ResponseError at once, as the unfenced
one does, where it retried what no retry can mend for its whole timeout (for ever with
``timeout=None``). Found in review."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest

from turbolock import LockError, RedlockClient, ResponseError
from turbolock.redis_server import RedisServer

PASSWORD = "Red-Secret-Pa55"
BUDGET = 1.0


@pytest.fixture(scope="module")
def ports() -> Iterator[list[int]]:
    users = [f"user notime on >{PASSWORD} ~* -@all +set +pttl +evalsha +eval +script|load +get +del +pexpire "
             "+incrby +ping +hello"]
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(RedisServer(extra_config=users)).port for _ in range(3)]


@pytest.mark.parametrize("core_name", ["c"], indirect=True)  # one rule for both cores
def test_fenced_acquire_refused_by_every_master_raises_at_once(ports: list[int], core_name: str) -> None:
    urls = [f"redis://notime:{PASSWORD}@127.0.0.1:{port}/0" for port in ports]
    redlock = RedlockClient(urls, core=core_name)
    try:
        started = time.monotonic()
        outcome: object
        try:
            outcome = redlock.acquire("x", 10, timeout=3.0, fenced=True)
        except LockError as exc:
            outcome = exc
        took = time.monotonic() - started
        assert isinstance(outcome, ResponseError) and took < BUDGET, (
            f"every master refuses the fenced acquire's script (no +time), yet after {took:.2f}s the "
            f"acquire gave {outcome!r}: it retried for its whole timeout")
    finally:
        redlock.close()
