"""close() from another thread while an auto-renewed acquire is in flight, on a client
whose renewer had not started yet. close() found no renewer to stop, and the acquire then started
one on the closed client: it handed back "auto-renewed" leases that were never renewed (lost by
their ttl) and a renewer thread ran on after close(), for good (found in review, Redlock; the
one-server client had the same gap). Now the acquire raises ``ClientClosedError``
(``CLOSED_DURING_ACQUIRE``), as it did when a renewer had already started (the asyncio clients
share the rule: ``stop_renewing_flow``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from _netfaults import FaultProxy
from turbolock import ClientClosedError, LockClient, RedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

HELD_BACK = 0.5


def _renewers(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in set(threading.enumerate()) - before if t.name == "turbolock-renewer" and t.is_alive()]


def _close_meanwhile(acquire: Callable[[], object], close: Callable[[], None]) -> dict[str, object]:
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = acquire()
        except ClientClosedError as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(HELD_BACK / 5)
    close()
    worker.join(10)
    assert not worker.is_alive()
    return outcome


@pytest.mark.parametrize("op", ["try_acquire", "acquire_many"])
def test_redlock(own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str,
                 op: str) -> None:
    servers = own_masters(3)
    client = RedlockClient([server.url for server in servers], node_timeout=HELD_BACK, core=core_name,
                           key_prefix=key_prefix)
    assert client.query("warm-up").held is False
    before = set(threading.enumerate())
    servers[2].pause()  # the acquire waits one node timeout for it: close() comes meanwhile
    try:
        outcome = _close_meanwhile(
            lambda: client.try_acquire("job", 5, auto_renew=True) if op == "try_acquire"
            else client.acquire_many(["job"], 5, auto_renew=True), client.close)
    finally:
        servers[2].resume()
    assert isinstance(outcome.get("error"), ClientClosedError), outcome
    assert client.renewing == 0 and not _renewers(before)


@pytest.mark.parametrize("op", ["try_acquire", "acquire_many"])
def test_one_server(redis_server: RedisServer, core_name: str, key_prefix: str, op: str) -> None:
    proxy = FaultProxy(redis_server.host, redis_server.port).start()
    try:
        client = LockClient.from_url(proxy.url, core=core_name, key_prefix=key_prefix)
        assert client.query("warm-up").held is False
        before = set(threading.enumerate())
        proxy.delay(HELD_BACK, to_server=False)  # the acquire's reply comes after close()
        outcome = _close_meanwhile(
            lambda: client.try_acquire("job", 5, auto_renew=True) if op == "try_acquire"
            else client.acquire_many(["job"], 5, auto_renew=True), client.close)
        assert isinstance(outcome.get("error"), ClientClosedError), outcome
        assert client.renewing == 0 and not _renewers(before)
    finally:
        proxy.stop()
