"""Masters that refuse a Redlock client's credentials (or, NOPERM, a command its ACL user may not
run), too many for a quorum: a blocking acquire raises ``AuthenticationError`` (``ResponseError``)
at once, as a LockClient does, instead of retrying what no retry can mend (with
``timeout=None``, what ``with redlock.lock(...)`` waits, it never returned and logged nothing).
One master refusing of three still leaves a quorum: the lock is taken. Found in review."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import pytest

from turbolock import AuthenticationError, RedlockClient, ResponseError
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

PASSWORD = "Red-Secret-Pa55"
WRONG = "Wr0ng-Red-Guess"
BUDGET = 1.0  # three masters' handshakes on loopback; a retrying wait would not end at all


@pytest.fixture(scope="module")
def ports() -> Iterator[list[int]]:
    users = [f"user locker on >{PASSWORD} ~* -@all +set +pttl +evalsha +script|load +get +del +pexpire",
             f"user reader on >{PASSWORD} ~* -@all +pttl +evalsha +script|load +get +del +pexpire"]
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(RedisServer(extra_config=users)).port for _ in range(3)]


def _urls(ports: list[int], *users: str) -> list[str]:
    return [f"redis://{user}@127.0.0.1:{port}/0" for user, port in zip(users, ports, strict=True)]


def _assert_refused(exc: BaseException, kind: type[BaseException]) -> None:
    assert type(exc) is kind, repr(exc)
    assert "refused this client" in str(exc) and PASSWORD not in str(exc) and WRONG not in str(exc)


@pytest.mark.parametrize(("users", "kind"), [
    ((f"locker:{WRONG}", f"locker:{WRONG}", f"locker:{PASSWORD}"), AuthenticationError),
    ((f"reader:{PASSWORD}",) * 3, ResponseError),  # NOPERM: SET not allowed
], ids=["wrong-password", "noperm"])
def test_a_blocking_acquire_refused_by_a_majority_raises_at_once(
        ports: list[int], core_name: str, users: tuple[str, ...], kind: type[BaseException]) -> None:
    redlock = RedlockClient(_urls(ports, *users), core=core_name)
    try:
        started = time.monotonic()
        with pytest.raises(kind) as raised:
            redlock.lock("x", 10).acquire(timeout=None)
        assert time.monotonic() - started < BUDGET
        _assert_refused(raised.value, kind)
    finally:
        redlock.close()


def test_one_master_refusing_of_three_leaves_a_quorum(ports: list[int], core_name: str) -> None:
    redlock = RedlockClient(_urls(ports, f"locker:{WRONG}", f"locker:{PASSWORD}", f"locker:{PASSWORD}"),
                            core=core_name)
    try:
        lease = redlock.try_acquire("y", 10)
        assert lease is not None and lease.instances.acquired == 2
        assert redlock.release(lease)
    finally:
        redlock.close()


def test_asyncio(ports: list[int], core_name: str) -> None:
    async def main() -> BaseException | None:
        redlock = AsyncRedlockClient(_urls(ports, *[f"locker:{WRONG}"] * 3), core=core_name)
        try:
            await asyncio.wait_for(redlock.lock("x", 10).acquire(timeout=None), BUDGET)
        except BaseException as exc:
            return exc
        finally:
            await redlock.close()
        return None

    outcome = asyncio.run(main())
    assert outcome is not None
    _assert_refused(outcome, AuthenticationError)
