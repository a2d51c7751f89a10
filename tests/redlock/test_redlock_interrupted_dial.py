"""A threaded Redlock call interrupted (Ctrl-C) while its new connections were still being
dialed (``Links.finish_all`` polling the connects) left those connections in the parked set
half-made: ``dialing``, non-blocking, no handshake sent, and its connect deadline frozen (found
in review of the parallel connects; ``Links.give`` now drops every connection whose connect
did not finish). Taken for live ones:

* the client's next Redlock call finishes the dial with the old connect deadline, which has
  passed: every healthy master fails its "handshake" and ``try_acquire`` raised QuorumError;
* once the Redlock client is closed, the sets go back to the masters' pools, and a master
  ``LockClient`` (the caller's, open after ``close()``) is handed the non-blocking, never
  handshaken socket: its next acquire fails at once with "did not answer within the call's
  deadline" (BlockingIOError) and reports the outcome as unknown;
* the bulk path likewise: a Ctrl-C in ``open_all`` (before ``fan_out`` counts itself busy)
  parks the masters already dialed, and the next ``acquire_many`` gets no quorum.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from turbolock import LockClient, RedlockClient
from turbolock._redlock import links as links_module


def _interrupt_the_connect_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C landing while ``finish_all`` waits for the connects to finish."""

    def readable(*args: Any, **kwargs: Any) -> list[Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(links_module, "readable", readable)


def test_next_redlock_call_after_an_interrupted_dial(session_masters: Any, core_name: str, key_prefix: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    urls = [server.url for server in session_masters[:3]]
    with RedlockClient(urls, core=core_name, key_prefix=key_prefix, node_timeout=0.05) as client:
        _interrupt_the_connect_poll(monkeypatch)
        with pytest.raises(KeyboardInterrupt):
            client.query("interrupted")
        monkeypatch.undo()
        time.sleep(0.2)  # past the interrupted connects' deadline
        # Every master is up and answering: the lock must be taken (it raised QuorumError).
        lease = client.try_acquire("after", 5)
        assert lease is not None
        assert client.release(lease)


def test_master_client_after_an_interrupted_dial(session_masters: Any, core_name: str, key_prefix: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    masters = [LockClient.from_url(server.url, core=core_name, key_prefix=key_prefix)
               for server in session_masters[:3]]
    try:
        redlock = RedlockClient(masters)
        _interrupt_the_connect_poll(monkeypatch)
        with pytest.raises(KeyboardInterrupt):
            redlock.query("interrupted")
        monkeypatch.undo()
        redlock.close()  # the masters' LockClients stay open and get their connections back
        time.sleep(0.05)
        for master in masters:
            # A healthy server (it raised AcquireOutcomeUnknownError, "did not answer").
            lease = master.try_acquire("after", 5)
            assert lease is not None
            assert master.release(lease)
    finally:
        for master in masters:
            master.close()


def test_next_bulk_call_after_an_interrupted_open(session_masters: Any, core_name: str, key_prefix: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The bulk path (``fan_out``) too: a Ctrl-C while ``open_all`` starts the third master's
    connect (say in its name lookup) leaves the first two masters' dials parked, and the next
    ``acquire_many`` fails on them."""
    from turbolock._sync.connection import Connection

    urls = [server.url for server in session_masters[:3]]
    with RedlockClient(urls, core=core_name, key_prefix=key_prefix, node_timeout=0.05) as client:
        real_dial, calls = Connection._dial, [0]

        def dial(conn: Connection, limit: float) -> Any:
            calls[0] += 1
            if calls[0] == 3:
                raise KeyboardInterrupt
            return real_dial(conn, limit)

        monkeypatch.setattr(Connection, "_dial", dial)
        with pytest.raises(KeyboardInterrupt):
            client.acquire_many(["interrupted"], 5)
        monkeypatch.undo()
        time.sleep(0.6)  # past the parked connects' deadline (a chunk timeout: 0.5 s for this ttl)
        result = client.acquire_many(["a", "b"], 5)
        # Every master is up: taken on all three (it was taken on one, "no quorum" on both).
        assert [lease is not None for lease in result.leases] == [True, True], result
        assert client.release_many(result.acquired) == [True, True]
