"""A fenced bulk acquire on a server whose operator renamed EXEC away (rename-command, as
tests/test_secrets_in_replies.py does for SET/EVALSHA): MULTI is accepted, EXEC is an unknown
command, and Redis answers an error but leaves the connection inside MULTI (only an ACL-refused
or aborted EXEC discards the transaction). The acquire raises, and its connection must not stay
inside MULTI: every later command on it would be answered QUEUED and never run (the transaction
ends with DISCARD). Found in review: the next try_acquire on that connection failed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from turbolock import LockError
from turbolock.redis_server import RedisServer


@pytest.fixture(scope="module")
def exec_renamed() -> Iterator[RedisServer]:
    with RedisServer(extra_config=['rename-command EXEC "exec-hidden"']) as server:
        yield server


@pytest.mark.parametrize("front", FRONTS)
def test_a_refused_exec_does_not_leave_a_pooled_connection_inside_multi(
        exec_renamed: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    fronts = Fronts.at(front, exec_renamed.url, core=core_name, key_prefix=key_prefix, max_connections=1)
    raw = redis.Redis(port=exec_renamed.port)
    try:
        client = fronts.make()
        with pytest.raises(LockError):
            client.acquire_many(["a", "b"], 10, fenced=True)
        in_multi = [c for c in raw.client_list() if "x" in c["flags"]]
        lease = None
        error = None
        try:
            lease = client.try_acquire("plain", 10)  # no transaction in this one
        except LockError as exc:
            error = exc
        assert in_multi == [] and error is None and lease is not None, (
            f"connections left inside MULTI: {[(c['addr'], c['multi']) for c in in_multi]}; "
            f"a plain try_acquire afterwards: {error!r}")
    finally:
        fronts.close()
        raw.close()
