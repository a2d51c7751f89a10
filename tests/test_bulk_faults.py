"""Calls whose connection fails mid-batch: unknown names are listed and cleaned up, never reported held."""

from __future__ import annotations

import threading

import pytest
import redis

from _eventually import eventually as _eventually
from turbolock import AcquireOutcomeUnknownError, LockClient, OutcomeUnknownError
from turbolock.redis_server import RedisServer


def _count_keys(raw: redis.Redis, prefix: bytes) -> int:
    return sum(1 for _ in raw.scan_iter(match=prefix + b"*", count=1000))


def test_acquire_many_lost_mid_batch_is_cleaned_up(own_server: RedisServer, core_name: str) -> None:
    raw = redis.Redis(port=own_server.port)
    with LockClient.from_url(own_server.url, core=core_name, timeout=0.3, chunk_size=1000) as client:
        assert client.query("warm-up").held is False
        names = [f"job:{i}" for i in range(5000)]
        own_server.pause()
        try:
            with pytest.raises(AcquireOutcomeUnknownError) as caught:
                client.acquire_many(names, 60)
        finally:
            own_server.resume()
        error = caught.value
        # Two chunks were in flight when the server stopped answering; the rest never left.
        assert error.names == names[:2000]
        assert error.not_sent == names[2000:]
        assert error.acquired == []
        assert not error.cleaned_up  # released in the background, never inline
        assert client.pending_cleanup <= 2000
        # The server now runs what it had buffered; the client releases it with our tokens in the
        # background, with no further call.
        assert _eventually(lambda: client.pending_cleanup == 0, 5.0)
        assert _count_keys(raw, client.key_prefix) == 0
    raw.close()


def test_release_many_lost_mid_batch_is_retried(own_server: RedisServer, core_name: str) -> None:
    raw = redis.Redis(port=own_server.port)
    with LockClient.from_url(own_server.url, core=core_name, timeout=0.3, chunk_size=500) as client:
        names = [f"r:{i}" for i in range(1500)]
        leases = client.acquire_many(names, 60).acquired
        assert len(leases) == 1500
        own_server.pause()
        try:
            with pytest.raises(OutcomeUnknownError) as caught:
                client.release_many(leases)
        finally:
            own_server.resume()
        assert caught.value.names == names
        assert client.pending_cleanup <= 1500
        assert _eventually(lambda: client.pending_cleanup == 0, 5.0)
        assert _count_keys(raw, client.key_prefix) == 0
    raw.close()


def test_single_acquire_lost_is_cleaned_up(own_server: RedisServer, core_name: str) -> None:
    raw = redis.Redis(port=own_server.port)
    with LockClient.from_url(own_server.url, core=core_name, timeout=0.3) as client:
        client.query("warm-up")
        own_server.pause()
        try:
            with pytest.raises(AcquireOutcomeUnknownError) as caught:
                client.try_acquire("maybe", 60)
        finally:
            own_server.resume()
        assert caught.value.names == ["maybe"]
        assert isinstance(caught.value, ConnectionError)
        assert _eventually(lambda: client.pending_cleanup == 0, 5.0)
        assert raw.exists(client.key_prefix + b"maybe") == 0
    raw.close()


def test_a_shortened_socket_timeout_is_restored_for_the_next_call(own_server: RedisServer,
                                                                  core_name: str) -> None:
    """A call that ran near its deadline shortens the kernel timeout; the next call must get its own back."""
    with LockClient.from_url(own_server.url, core=core_name, timeout=2.0, max_connections=1) as client:
        client.query("warm-up")
        conn = client._pool._idle[0]
        if conn.tls or conn.sock is None:
            pytest.skip("plain sockets only")
        conn._set_kernel_timeout(conn.sock, 0.05)  # as a call with 50 ms left would have
        own_server.pause()
        resume = threading.Timer(0.3, own_server.resume)
        resume.start()
        try:
            assert client.query("slow").held is False  # answered after ~0.3 s, well inside 2 s
        finally:
            resume.join()
            own_server.resume()
