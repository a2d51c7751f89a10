"""The asyncio subscriber's connection closed by the server right after its handshake (a
restart, a ``CLIENT KILL``, a proxy hanging up) is made again (found in review). The waker set
its ``on_close`` only once the connect returned, a few loop turns after the handshake's reply: a
close in between went unheard, and the waker kept the dead connection (its SSUBSCRIBE written
nowhere, nobody reconnecting): every waiter only polled until the keepalive's unanswered PING,
about 20 s later. The threaded waker hears it at once (its first recv). The proxy here closes the
client's second connection (the subscriber's) right after the server's first reply; the race is
tight, so the scenario runs a few times (the old code failed on the first)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
import redis

from turbolock import LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the waker's rule: no core's own


class HangUpProxy:
    """Forwards to ``port``; its ``hang_up``-th connection is closed right after the server's
    first reply (the handshake's answer) reached the client."""

    def __init__(self, port: int, hang_up: int) -> None:
        self.target, self.hang_up, self.count = port, hang_up, 0
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.count += 1
            server = socket.create_connection(("127.0.0.1", self.target))
            self.sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, self.count == self.hang_up),
                             daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, hang_up: bool) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
                if hang_up:
                    dst.shutdown(socket.SHUT_RDWR)
                    src.close()
                    return
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        for sock in self.sockets:
            try:
                sock.close()
            except OSError:
                pass


async def _subscribed_within(url: str, prefix: str, raw: redis.Redis, core: str,
                             seconds: float) -> float | None:
    channel = (prefix + "k").encode()
    async with AsyncLockClient.from_url(url, key_prefix=prefix, core=core) as client:
        waiting = asyncio.ensure_future(client.lock("k", 30).acquire(timeout=30))
        started = time.monotonic()
        try:
            while time.monotonic() - started < seconds:
                await asyncio.sleep(0.05)
                if raw.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1]:
                    return time.monotonic() - started
            return None
        finally:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)


def test_a_subscriber_connection_closed_after_its_handshake_is_made_again(
        redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis) -> None:
    for attempt in range(8):
        prefix = f"{key_prefix}{attempt}:"
        with LockClient.from_url(redis_server.url, key_prefix=prefix) as holder:
            assert holder.try_acquire("k", 30) is not None
            proxy = HangUpProxy(redis_server.port, hang_up=2)  # 1: the pool's, 2: the subscriber's
            try:
                took = asyncio.run(_subscribed_within(f"redis://127.0.0.1:{proxy.port}", prefix, raw,
                                                      core_name, 3.0))
            finally:
                proxy.close()
        # The waker connects again within RECONNECT_DELAYS[0] (50 ms) and subscribes again.
        assert took is not None, (f"run {attempt}: the waiter's key was still not subscribed 3 s after a "
                                  f"subscriber connection closed right after its handshake "
                                  f"({proxy.count} connections made: none was made again)")
