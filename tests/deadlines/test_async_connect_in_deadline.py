"""asyncio: opening a connection is part of a call's ``timeout``, as on the blocking client.
A proxy in front of a real redis-server delays every reply by 0.7 s; with ``timeout=1`` the
handshake takes 0.7 s and the command another 0.7 s. The blocking client gives up at 1 s; the
asyncio client's call used to start a fresh ``timeout`` once its connection was open and
answer after 1.4 s (with the defaults, 5 s + 5 s after a reconnect)."""

from __future__ import annotations

import time

import pytest

from _netfaults import FaultProxy
from turbolock import LockClient, LockError
from turbolock.asyncio import AsyncLockClient

from .conftest import Runner

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

TIMEOUT = 1.0
SLACK = 0.2


def test_the_blocking_client_counts_the_connect_in_its_timeout(late_replies: FaultProxy, core_name: str,
                                                                key_prefix: str) -> None:
    with LockClient.from_url(late_replies.url, timeout=TIMEOUT, connect_timeout=TIMEOUT, core=core_name,
                             key_prefix=key_prefix) as client:
        started = time.monotonic()
        with pytest.raises(LockError):
            client.try_acquire("a", 10)
        assert time.monotonic() - started <= TIMEOUT + SLACK


@pytest.mark.parametrize("call", ["try_acquire", "query", "acquire_many", "release"])
def test_the_asyncio_client_counts_the_connect_in_its_timeout(arun_asyncio: Runner, late_replies: FaultProxy,
                                                               core_name: str, key_prefix: str,
                                                               call: str) -> None:
    async def body() -> tuple[float, BaseException | None]:
        client = AsyncLockClient.from_url(late_replies.url, timeout=TIMEOUT, connect_timeout=TIMEOUT,
                                          core=core_name, key_prefix=key_prefix)
        started = time.monotonic()
        raised: BaseException | None = None
        try:
            if call == "try_acquire":
                await client.try_acquire("a", 10)
            elif call == "query":
                await client.query("a")
            elif call == "acquire_many":
                await client.acquire_many(["m1", "m2"], 10)
            else:
                await client.release(client.lease("a", b"t" * 16))
        except Exception as exc:  # the kind depends on the call: what matters is when
            raised = exc
        elapsed = time.monotonic() - started
        late_replies.heal()
        await client.close()
        return elapsed, raised

    elapsed, raised = arun_asyncio(body)
    assert elapsed <= TIMEOUT + SLACK, f"{call} on a new connection took {elapsed:.2f}s, budget {TIMEOUT}s"
    assert raised is not None, f"{call} answered after {elapsed:.2f}s, past its budget"
