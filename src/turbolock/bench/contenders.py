"""The clients being compared, each driven the way its users would drive it.

Single pairs: ``pairs(names)`` takes and releases each name in turn on one connection.
Bulk: ``bulk(names)`` takes every name in one batch, then releases them all, and times both.
Every contender checks its own results, so a fast wrong answer fails instead of winning.
"""

from __future__ import annotations

import gc
import os
import socket
import time
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import redis

from turbolock import LockClient
from turbolock._wire import core as _core
from turbolock._wire import scripts as _scripts
from turbolock.options import redis_py_url

from .workload import CHUNK_SIZE, KEY_PREFIX, TOKEN_BYTES, TTL_MS, TTL_SECONDS


class BenchmarkError(RuntimeError):
    """A contender did not do what it was asked (a lock not taken, a release refused)."""


def per_key(replies: list[Any], count: int, chunk: int) -> list[int]:
    """1 per key, 0 for each key a failures-only script call (RELEASE_MANY, RENEW_MANY) named:
    the hand-written contenders check every answer, as turbolock does."""
    row = [1] * count
    at = 0
    for reply in replies:
        for position in reply[::2]:
            row[at + position - 1] = 0
        at += chunk
    return row


class Timing(NamedTuple):
    ops: int
    wall: float
    cpu: float

    @property
    def rate(self) -> float:
        return self.ops / self.wall


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float, float]:
    """``fn(*args)`` with its wall and process CPU seconds; garbage from before is collected first."""
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    result = fn(*args)
    wall = time.perf_counter() - start
    return result, wall, time.process_time() - cpu


class PairContender(Protocol):
    def pairs(self, names: list[str]) -> Timing: ...

    def close(self) -> None: ...


class BulkContender(Protocol):
    def bulk(self, names: list[str]) -> tuple[Timing, Timing]: ...

    def close(self) -> None: ...


def _tokens(count: int) -> list[bytes]:
    blob = os.urandom(TOKEN_BYTES * count)
    return [blob[i:i + TOKEN_BYTES] for i in range(0, len(blob), TOKEN_BYTES)]


def core_available(core: str) -> bool:
    return core == "py" or _core.core_c is not None


class SocketLoop:
    """A pair's commands over plain blocking sockets with no client at all: ``SET NX PX`` to
    every server, then the ``RELEASE`` script's ``EVALSHA`` to every server, each reply read
    before going on, every command's bytes made before the clock starts. The Python floor for
    sequential pairs (one server) and Redlock pairs (several): what no Python client sending
    these bytes can beat."""

    def __init__(self, addresses: list[tuple[str, int]]) -> None:
        self.socks = []
        for address in addresses:
            sock = socket.create_connection(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.socks.append(sock)
        self.buffer = _core.default_core.CommandBuffer(KEY_PREFIX.encode())

    def pairs(self, names: list[str]) -> Timing:
        socks, buf = self.socks, self.buffer
        scratch = bytearray(4096)
        buf.append_command((b"SCRIPT", b"LOAD", _scripts.RELEASE.source))
        load = buf.take()
        for sock in socks:
            sock.sendall(load)
            sock.recv_into(scratch)
        pairs = []  # every command made before the clock starts: the loop is the sockets alone
        for name in names:
            token = os.urandom(TOKEN_BYTES)
            buf.append_set_nx_px(name.encode(), token, TTL_MS)
            acquire = buf.take()
            buf.append_evalsha(_scripts.RELEASE.sha, name.encode(), token, None)
            pairs.append((acquire, buf.take()))

        def run() -> None:
            for acquire, release in pairs:
                for sock in socks:
                    sock.sendall(acquire)
                for sock in socks:
                    if sock.recv_into(scratch) != 5:  # +OK\r\n
                        raise BenchmarkError("socket loop: a lock was not taken")
                for sock in socks:
                    sock.sendall(release)
                for sock in socks:
                    if sock.recv_into(scratch) != 4:  # :1\r\n (deleted, no waiter told)
                        raise BenchmarkError("socket loop: a lock was not released")

        _, wall, cpu = timed(run)
        return Timing(len(names), wall, cpu)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


class Turbolock:
    """``LockClient`` on one core: try_acquire/release, acquire_many/release_many."""

    def __init__(self, url: str, core: str) -> None:
        self.client = LockClient.from_url(url, core=core, key_prefix=KEY_PREFIX, chunk_size=CHUNK_SIZE,
                                          max_connections=1)

    def pairs(self, names: list[str]) -> Timing:
        acquire = self.client.try_acquire
        release = self.client.release

        def run() -> None:
            for name in names:
                lease = acquire(name, TTL_SECONDS)
                if lease is None or not release(lease):
                    raise BenchmarkError(f"turbolock: lock {name!r} was not taken and released")

        _, wall, cpu = timed(run)
        return Timing(len(names), wall, cpu)

    def bulk(self, names: list[str]) -> tuple[Timing, Timing]:
        result, wall, cpu = timed(self.client.acquire_many, names, TTL_SECONDS)
        leases = result.acquired
        if len(leases) != len(names):
            raise BenchmarkError(f"turbolock: {len(names) - len(leases)} of {len(names)} locks not taken")
        released, release_wall, release_cpu = timed(self.client.release_many, leases)
        if not all(released):
            raise BenchmarkError("turbolock: some releases were refused")
        return Timing(len(names), wall, cpu), Timing(len(leases), release_wall, release_cpu)

    def close(self) -> None:
        self.client.close()


def hiredis_available() -> bool:
    """Whether redis-py here parses replies with hiredis (``pip install hiredis``)."""
    try:
        from redis.utils import HIREDIS_AVAILABLE
    except ImportError:  # pragma: no cover - every redis-py turbolock supports has it
        return False
    return bool(HIREDIS_AVAILABLE)


def redis_py(url: str, hiredis: bool | None = None, **options: Any) -> redis.Redis:
    """A redis-py client with hiredis's parser or redis-py's own (``None``: as installed)."""
    if hiredis is not None:
        try:
            from redis._parsers import _HiredisParser, _RESP2Parser
        except ImportError:  # redis-py 4.x
            from redis.connection import HiredisParser as _HiredisParser  # type: ignore[attr-defined,no-redef]
            from redis.connection import PythonParser as _RESP2Parser  # type: ignore[attr-defined,no-redef]
        options["parser_class"] = _HiredisParser if hiredis else _RESP2Parser
    return redis.Redis.from_url(redis_py_url(url), **options)


class RedisPyLock:
    """``redis.lock.Lock``: a Lock object per name, acquire(blocking=False), release()."""

    def __init__(self, url: str, hiredis: bool | None = None) -> None:
        self.redis = redis_py(url, hiredis)

    def pairs(self, names: list[str]) -> Timing:
        client = self.redis

        def run() -> None:
            for name in names:
                lock = client.lock(KEY_PREFIX + name, timeout=TTL_SECONDS)
                if not lock.acquire(blocking=False):
                    raise BenchmarkError(f"redis-py Lock: {name!r} was not taken")
                lock.release()

        _, wall, cpu = timed(run)
        return Timing(len(names), wall, cpu)

    def close(self) -> None:
        self.redis.close()


class RedisPyScript:
    """What a careful redis-py user writes by hand: ``SET NX PX`` and a registered Lua release."""

    def __init__(self, url: str, hiredis: bool | None = None) -> None:
        self.redis = redis_py(url, hiredis)
        self.release = self.redis.register_script(_scripts.RELEASE.source)

    def pairs(self, names: list[str]) -> Timing:
        client = self.redis
        release = self.release

        def run() -> None:
            for name in names:
                key = KEY_PREFIX + name
                token = os.urandom(TOKEN_BYTES)
                if not client.set(key, token, nx=True, px=TTL_MS) or release(keys=[key], args=[token]) != 1:
                    raise BenchmarkError(f"redis-py SET NX + script: {name!r} was not taken and released")

        _, wall, cpu = timed(run)
        return Timing(len(names), wall, cpu)

    def close(self) -> None:
        self.redis.close()


class RedisPyPipeline:
    """``pipeline(transaction=False)``: SET NX PX, then EVALSHA release, in chunks of CHUNK_SIZE."""

    def __init__(self, url: str, hiredis: bool | None = None) -> None:
        self.redis = redis_py(url, hiredis)
        self.sha = self.redis.script_load(_scripts.RELEASE.source)

    def _acquire(self, names: list[str]) -> tuple[list[str], list[bytes], list[Any]]:
        keys = [KEY_PREFIX + name for name in names]
        tokens = _tokens(len(keys))
        pipe = self.redis.pipeline(transaction=False)
        replies: list[Any] = []
        for start in range(0, len(keys), CHUNK_SIZE):
            stop = start + CHUNK_SIZE
            for key, token in zip(keys[start:stop], tokens[start:stop], strict=True):
                pipe.set(key, token, nx=True, px=TTL_MS)
            replies.extend(pipe.execute())
        return keys, tokens, replies

    def _release(self, keys: list[str], tokens: list[bytes]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        sha = self.sha
        replies: list[Any] = []
        for start in range(0, len(keys), CHUNK_SIZE):
            stop = start + CHUNK_SIZE
            for key, token in zip(keys[start:stop], tokens[start:stop], strict=True):
                pipe.evalsha(sha, 1, key, token)
            replies.extend(pipe.execute())
        return replies

    def bulk(self, names: list[str]) -> tuple[Timing, Timing]:
        (keys, tokens, replies), wall, cpu = timed(self._acquire, names)
        if not all(replies):
            raise BenchmarkError("redis-py pipeline: some locks were not taken")
        released, release_wall, release_cpu = timed(self._release, keys, tokens)
        if released.count(1) != len(keys):
            raise BenchmarkError("redis-py pipeline: some releases were refused")
        return Timing(len(keys), wall, cpu), Timing(len(keys), release_wall, release_cpu)

    def close(self) -> None:
        self.redis.close()


class RedisPyBatchedRelease(RedisPyPipeline):
    """The best hand-written bulk release we know: turbolock's RELEASE_MANY script per
    ``CHUNK_SIZE`` locks, eight calls per pipelined ``execute()`` (what turbolock writes at once);
    the acquire as ``RedisPyPipeline``'s."""

    def __init__(self, url: str, hiredis: bool | None = None) -> None:
        super().__init__(url, hiredis)
        self.sha = self.redis.script_load(_scripts.RELEASE_MANY.source)

    def _release(self, keys: list[str], tokens: list[bytes]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        per_write = CHUNK_SIZE * 8
        replies: list[Any] = []
        for write in range(0, len(keys), per_write):
            for start in range(write, min(len(keys), write + per_write), CHUNK_SIZE):
                chunk = keys[start:start + CHUNK_SIZE]
                pipe.evalsha(self.sha, len(chunk), *chunk, *tokens[start:start + CHUNK_SIZE])
            replies.extend(pipe.execute())
        return per_key(replies, len(keys), CHUNK_SIZE)
