"""A renewed lease whose release failed before anything was sent (server down) is taken off the
renewer first (``releasing()``). An ``extend``/``check`` that then heard the key is someone
else's went to the renewal book, which returned early for a lease it no longer renewed: the lease
was never marked lost, ``ensure_held()`` passed and ``valid_for()`` stayed > 0 although the
server had just said it is not ours (found in review; the README: "A lease that a call heard is
no longer the lock's holder ... is lost from then on"). Now it is marked lost, without on_lost."""

from __future__ import annotations

import pytest
import redis

from turbolock import ConnectionError, LockClient, LockLostError
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the renewal book's rule


def test_check_after_a_failed_release_marks_the_lease_lost(own_server: RedisServer, core_name: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, timeout=0.3) as client:
        lease = client.try_acquire("job", 5, auto_renew=True)
        assert lease is not None
        own_server.stop(remove_directory=False)
        with pytest.raises(ConnectionError):  # refused: nothing was sent, the lock is still held
            client.release(lease)
        own_server.start()  # no persistence: the key is gone; someone else takes the name
        raw = redis.Redis(port=own_server.port)
        try:
            raw.set(client.key_prefix + b"job", b"someone-else", px=60000)
            assert client.check(lease) is None  # the server says: not ours
            assert client.extend(lease, 5) is False  # and again
            assert lease.is_lost, f"not marked lost; valid_for()={lease.valid_for():.3f}"
            with pytest.raises(LockLostError):
                lease.ensure_held()
        finally:
            raw.close()


def test_asyncio_check_after_a_failed_release_marks_the_lease_lost(own_server: RedisServer,
                                                                   core_name: str) -> None:
    import asyncio

    from turbolock.asyncio import AsyncLockClient

    async def body() -> None:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, timeout=0.3)
        try:
            lease = await client.try_acquire("job", 5, auto_renew=True)
            assert lease is not None
            own_server.stop(remove_directory=False)
            with pytest.raises(ConnectionError):
                await client.release(lease)
            own_server.start()
            raw = redis.Redis(port=own_server.port)
            try:
                raw.set(client.key_prefix + b"job", b"someone-else", px=60000)
                assert await client.check(lease) is None
                assert lease.is_lost, f"not marked lost; valid_for()={lease.valid_for():.3f}"
            finally:
                raw.close()
        finally:
            await client.close()

    asyncio.run(body())
