"""What every Lock object shares: ``Lock`` (LockClient), ``AsyncLock`` (AsyncLockClient) and
``RedlockLock`` (RedlockClient) behave alike. Each test is written once and runs against all
three kinds, on both cores, against real redis-servers.

The ``kind`` fixture is the adapter: ``kind.client`` makes Lock objects, ``kind.run(x)`` awaits
``x`` when it is a coroutine (the asyncio kind runs its event loop on a thread of its own, so
another thread can drive it while the test waits) and passes plain results through, and
``kind.raws`` are redis-py connections to every server the kind writes to (one, or each master).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis

from scenarios._harness import run_workers
from turbolock import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockClient,
    LockNotOwnedError,
    LockUsageError,
    RedlockClient,
)
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

KINDS = ["Lock", "AsyncLock", "RedlockLock"]
CALL_LIMIT = 20.0
"""No call through ``kind.run`` may take longer: a hang fails the test instead of stalling it."""
NODE_TIMEOUT = 0.25
"""Per-master deadline of the Redlock clients here: the default 50 ms is tight on two shared cores."""


class LoopThread:
    """An event loop running on a thread of its own; ``run`` hands it a coroutine and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="lock-objects-loop", daemon=True)
        self.thread.start()

    def run(self, value: Any) -> Any:
        if not inspect.isawaitable(value):
            return value

        async def wait() -> Any:
            return await value

        return asyncio.run_coroutine_threadsafe(wait(), self.loop).result(CALL_LIMIT)

    def tasks_left(self) -> list[asyncio.Task[Any]]:
        async def others() -> list[asyncio.Task[Any]]:
            for _ in range(5):
                await asyncio.sleep(0)
            me = asyncio.current_task()
            return [task for task in asyncio.all_tasks() if task is not me and not task.done()]

        left: list[asyncio.Task[Any]] = self.run(others())
        return left

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class Kind:
    """One kind of Lock object: its client, a way to run what its methods return, and the servers."""

    def __init__(self, name: str, core: str, key_prefix: str, urls: list[str], raws: list[redis.Redis],
                 loop: LoopThread | None) -> None:
        self.name = name
        self.core = core
        self.key_prefix = key_prefix
        self.urls = urls
        self.raws = raws
        self.loop = loop
        self._clients: list[Any] = []
        self.client = self.new_client()

    @property
    def is_async(self) -> bool:
        return self.loop is not None

    @property
    def is_redlock(self) -> bool:
        return self.name == "RedlockLock"

    @property
    def majority(self) -> list[redis.Redis]:
        """The servers a lock must be lost on to be lost: the only one, or a majority of masters."""
        return self.raws[: len(self.raws) // 2 + 1]

    def run(self, value: Any) -> Any:
        """The result of a call: awaited on the kind's loop when it is a coroutine."""
        if self.loop is not None:
            return self.loop.run(value)
        assert not inspect.isawaitable(value), f"{self.name} returned an awaitable"
        return value

    def new_client(self, url: str | None = None, **options: Any) -> Any:
        """Another client of this kind, on the same servers (or on ``url``), closed at the end."""
        options.setdefault("core", self.core)
        options.setdefault("key_prefix", self.key_prefix)
        client: Any
        if self.name == "Lock":
            client = LockClient.from_url(url or self.urls[0], **options)
        elif self.name == "AsyncLock":
            client = AsyncLockClient.from_url(url or self.urls[0], **options)
        else:
            options.setdefault("node_timeout", NODE_TIMEOUT)
            client = RedlockClient([url] if url else self.urls, **options)
        self._clients.append(client)
        return client

    def key(self, name: str) -> bytes:
        return self.key_prefix.encode() + name.encode()

    def pttls(self, name: str) -> list[int]:
        """PTTL of the lock's key on every server (-2: no key)."""
        return [int(raw.pttl(self.key(name))) for raw in self.raws]

    def with_block(self, lock: Any, *steps: Callable[[], Any]) -> None:
        """Run ``steps`` in order inside ``with lock`` (``async with`` for the asyncio kind);
        a step may return a coroutine, which is awaited there."""
        if self.loop is None:
            with lock:
                for step in steps:
                    assert not inspect.isawaitable(step())
            return

        async def block() -> None:
            async with lock:
                for step in steps:
                    result = step()
                    if inspect.isawaitable(result):
                        await result

        self.run(block())

    def close(self) -> None:
        for client in reversed(self._clients):
            self.run(client.close())
        if self.loop is not None:
            left = self.loop.tasks_left()
            self.loop.close()
            assert not left, f"tasks left running: {left}"


@pytest.fixture(scope="module")
def masters() -> Iterator[list[RedisServer]]:
    """Three Redlock masters for this module."""
    servers: list[RedisServer] = []
    try:
        for _ in range(3):
            servers.append(RedisServer().start())
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest, core_name: str, key_prefix: str) -> Iterator[Kind]:
    name: str = request.param
    servers: list[RedisServer]
    if name == "RedlockLock":
        servers = request.getfixturevalue("masters")
    else:
        servers = [request.getfixturevalue("redis_server")]
    raws = [redis.Redis(host=server.host, port=server.port) for server in servers]
    loop = LoopThread() if name == "AsyncLock" else None
    made = Kind(name, core_name, key_prefix, [server.url for server in servers], raws, loop)
    try:
        yield made
    finally:
        try:
            made.close()
        finally:
            for raw in raws:
                raw.close()


def _hides_token(error: BaseException, token: bytes) -> None:
    text = f"{error} {error!r}"
    assert token.hex() not in text
    assert repr(token)[2:-1] not in text


# -- 1. extend while held; LockNotOwnedError once the key is gone or someone else's ----------------


def test_extend_returns_true_while_held(kind: Kind) -> None:
    lock = kind.client.lock("ext", 5)
    assert kind.run(lock.acquire()) is True
    assert kind.run(lock.extend()) is True
    assert kind.run(lock.extend(8)) is True
    assert all(7_000 < pttl <= 8_000 for pttl in kind.pttls("ext")), kind.pttls("ext")
    assert lock.lease is not None
    kind.run(lock.release())


@pytest.mark.parametrize("behind_its_back", ["deleted", "taken"])
def test_extend_of_a_lock_lost_behind_its_back_raises_not_owned(kind: Kind, behind_its_back: str) -> None:
    lock = kind.client.lock("gone", 10)
    assert kind.run(lock.acquire()) is True
    token = lock.lease.token
    for raw in kind.majority:
        if behind_its_back == "deleted":
            raw.delete(kind.key("gone"))
        else:
            raw.set(kind.key("gone"), b"someone-else-token", px=10_000)

    try:
        extended = kind.run(lock.extend())
    except LockNotOwnedError as error:
        caught = error
    else:
        pytest.fail(f"extend() returned {extended!r} instead of raising LockNotOwnedError; the key's PTTL "
                    f"on each server is now {kind.pttls('gone')}")

    assert caught.names == ["gone"]
    _hides_token(caught, token)
    assert lock.lease is not None and lock.lease.is_lost, "an extend that found the lock gone marks it lost"
    assert lock.valid_for() == 0.0
    if behind_its_back == "taken":
        assert all(raw.get(kind.key("gone")) == b"someone-else-token" for raw in kind.majority)


# -- 2. extend(ttl, additive=True) adds to what is left; replace sets it ---------------------------


def test_additive_extend_adds_to_what_is_left(kind: Kind) -> None:
    lock = kind.client.lock("add", 10)
    assert kind.run(lock.acquire()) is True
    assert kind.run(lock.extend(5, additive=True)) is True
    pttls = kind.pttls("add")
    assert all(14_500 <= pttl <= 15_000 for pttl in pttls), pttls
    assert 14.0 < lock.valid_for() < 15.0

    assert kind.run(lock.extend(5)) is True
    pttls = kind.pttls("add")
    assert all(4_500 <= pttl <= 5_000 for pttl in pttls), pttls
    assert 4.5 < lock.valid_for() < 5.0
    kind.run(lock.release())


def test_additive_of_the_wrong_type_is_refused(kind: Kind) -> None:
    lock = kind.client.lock("add-type", 10)
    assert kind.run(lock.acquire()) is True
    for wrong in ("yes", 1, None):
        with pytest.raises(InvalidArgumentTypeError) as caught:
            kind.run(lock.extend(5, additive=wrong))
        assert caught.value.argument == "additive"
    assert all(9_000 < pttl <= 10_000 for pttl in kind.pttls("add-type")), "nothing may have been sent"
    assert lock.lease is not None
    kind.run(lock.release())


# -- 3. owned(), remaining(), locked() -------------------------------------------------------------


def test_owned_and_remaining(kind: Kind) -> None:
    lock = kind.client.lock("own", 10)
    assert kind.run(lock.owned()) is False
    assert kind.run(lock.remaining()) == 0.0
    assert kind.run(lock.acquire()) is True
    assert kind.run(lock.owned()) is True
    assert 9.5 < kind.run(lock.remaining()) <= 10.0

    for raw in kind.majority:
        raw.delete(kind.key("own"))
    assert kind.run(lock.owned()) is False
    assert kind.run(lock.remaining()) == 0.0


def test_remaining_is_zero_after_release(kind: Kind) -> None:
    lock = kind.client.lock("own2", 10)
    assert kind.run(lock.acquire()) is True
    kind.run(lock.release())
    assert kind.run(lock.owned()) is False
    assert kind.run(lock.remaining()) == 0.0


def test_locked_says_whether_anyone_holds_the_name(kind: Kind) -> None:
    other = kind.new_client()
    holder = other.lock("busy", 10)
    lock = kind.client.lock("busy", 10)
    assert kind.run(lock.locked()) is False
    assert kind.run(holder.acquire()) is True
    assert kind.run(lock.locked()) is True
    assert kind.run(lock.owned()) is False
    assert kind.run(lock.remaining()) == 0.0
    kind.run(holder.release())
    assert kind.run(lock.locked()) is False


# -- 4. releasing inside a with block ---------------------------------------------------------------


def test_release_inside_with_block_is_a_usage_error_at_exit(kind: Kind) -> None:
    lock = kind.client.lock("inside", 10)
    with pytest.raises(LockUsageError) as caught:
        kind.with_block(lock, lock.release)
    assert caught.value.names == ["inside"]
    assert lock.lease is None
    assert kind.pttls("inside") == [-2] * len(kind.raws)


def test_block_exception_wins_over_release_inside_block(kind: Kind) -> None:
    lock = kind.client.lock("inside2", 10)

    def boom() -> None:
        raise KeyError("from the block")

    with pytest.raises(KeyError, match="from the block"):
        kind.with_block(lock, lock.release, boom)
    assert lock.lease is None
    assert kind.pttls("inside2") == [-2] * len(kind.raws)


# -- 5. contradictory arguments --------------------------------------------------------------------


def _names_both(error: InvalidArgumentError, timeout: object) -> None:
    assert error.argument == "blocking"
    message = str(error)
    assert "blocking=False" in message
    assert f"timeout={timeout!r}" in message


def test_blocking_false_with_a_timeout_is_refused(kind: Kind) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        kind.client.lock("contra", 10, blocking=False, timeout=0.2)
    _names_both(caught.value, 0.2)

    lock = kind.client.lock("contra", 10)
    with pytest.raises(InvalidArgumentError) as caught:
        kind.run(lock.acquire(blocking=False, timeout=1))
    _names_both(caught.value, 1)
    assert lock.lease is None
    assert kind.pttls("contra") == [-2] * len(kind.raws), "nothing may have been sent"


def test_blocking_false_with_timeout_zero_is_accepted(kind: Kind) -> None:
    lock = kind.client.lock("zero", 10, blocking=False, timeout=0)
    assert kind.run(lock.acquire()) is True
    kind.run(lock.release())
    assert kind.run(lock.acquire(blocking=False, timeout=0)) is True
    kind.run(lock.release())
    assert kind.pttls("zero") == [-2] * len(kind.raws)


# -- 6. no ttl: 30 s renewed until released ---------------------------------------------------------


def test_no_ttl_means_30_seconds_renewed_until_released(kind: Kind) -> None:
    lock = kind.client.lock("watchdog")
    assert lock.ttl == 30
    assert lock.auto_renew is True
    assert kind.run(lock.acquire()) is True
    assert lock.lease is not None and lock.lease.auto_renew is True
    assert kind.client.renewing == 1
    assert all(29_000 < pttl <= 30_000 for pttl in kind.pttls("watchdog"))
    kind.run(lock.release())
    assert kind.client.renewing == 0
    assert kind.pttls("watchdog") == [-2] * len(kind.raws)


def test_no_ttl_without_renewal(kind: Kind) -> None:
    lock = kind.client.lock("plain30", auto_renew=False)
    assert lock.ttl == 30
    assert lock.auto_renew is False
    assert kind.run(lock.acquire()) is True
    assert lock.lease is not None and lock.lease.auto_renew is False
    assert kind.client.renewing == 0
    assert all(29_000 < pttl <= 30_000 for pttl in kind.pttls("plain30"))
    kind.run(lock.release())


# -- 7. timeout=None waits until the lock is free ---------------------------------------------------


def test_timeout_none_waits_until_the_lock_is_free(kind: Kind) -> None:
    holder = kind.client.lock("queue", 10)
    assert kind.run(holder.acquire()) is True
    # Default settings, except the per-master deadline of a Redlock client.
    waiter_client = kind.new_client()
    waiter = waiter_client.lock("queue", 10)
    assert waiter.timeout is None and waiter.blocking is True
    failures: list[BaseException] = []

    def release() -> None:
        try:
            kind.run(holder.release())
        except BaseException as exc:  # reported below
            failures.append(exc)

    timer = threading.Timer(0.6, release)
    started = time.monotonic()
    timer.start()
    try:
        acquired = kind.run(waiter.acquire())
        elapsed = time.monotonic() - started
    finally:
        timer.join()
    assert failures == []
    assert acquired is True
    assert 0.55 < elapsed < 1.5, f"got the lock after {elapsed:.3f}s"
    assert kind.run(waiter.owned()) is True
    kind.run(waiter.release())


# -- 8. a short wait stays short against a stopped server ------------------------------------------


@pytest.mark.parametrize("kind", ["Lock", "AsyncLock"], indirect=True)
def test_short_wait_ends_on_time_against_a_stopped_server(kind: Kind, own_server: RedisServer) -> None:
    client = kind.new_client(url=own_server.url, timeout=3.0)
    warm = client.lock("warm", 5)
    assert kind.run(warm.acquire()) is True
    kind.run(warm.release())
    lock = client.lock("stopped", 5)
    wait = 0.3
    own_server.pause()
    try:
        started = time.monotonic()
        acquired = kind.run(lock.acquire(timeout=wait))
        elapsed = time.monotonic() - started
    finally:
        own_server.resume()
    assert acquired is False
    assert elapsed < wait + 0.15, f"a {wait}s wait took {elapsed:.3f}s"
    assert lock.lease is None


# -- 8b. a single attempt waits for a slow server as long as the call may ---------------------


@pytest.mark.parametrize("kind", ["Lock", "AsyncLock"], indirect=True)
@pytest.mark.parametrize("one_attempt", [{"blocking": False}, {"timeout": 0}],
                         ids=["blocking_false", "timeout_0"])
def test_one_attempt_has_the_whole_call_deadline(kind: Kind, own_server: RedisServer,
                                                 one_attempt: dict[str, Any]) -> None:
    # A slow server is not a held lock: a single attempt waits for the reply as long as any call
    # may (the client's timeout), and takes the lock once the server answers.
    client = kind.new_client(url=own_server.url, timeout=3.0)
    warm = client.lock("warm", 5)
    assert kind.run(warm.acquire()) is True
    kind.run(warm.release())
    busy_ms = 300
    raw = redis.Redis(host=own_server.host, port=own_server.port)
    # SIGSTOP for busy_ms: the server answers nothing meanwhile. (A script spinning on TIME would
    # spin forever on Valkey, whose TIME stands still within a script.)
    own_server.pause()
    busy = threading.Timer(busy_ms / 1000, own_server.resume)
    try:
        busy.start()
        lock = client.lock("slow-server", 5)
        started = time.monotonic()
        acquired = kind.run(lock.acquire(**one_attempt))
        elapsed = time.monotonic() - started
        assert acquired is True, f"one attempt gave up after {elapsed:.3f}s on a server busy for {busy_ms} ms"
        assert elapsed >= 0.15, f"the attempt took {elapsed:.3f}s: the server was not busy, it proves nothing"
        assert elapsed < 3.0
        assert raw.pttl(kind.key("slow-server")) > 0
        kind.run(lock.release())
    finally:
        busy.join(10)
        own_server.resume()
        raw.close()


# -- 9. adopting a lock taken elsewhere ------------------------------------------------------------


def take_elsewhere(index: int, kind_name: str, urls: list[str], core: str, key_prefix: str, name: str,
                   token: bytes) -> dict[str, Any]:
    """In another process: take ``name`` with ``token`` for 30 s and leave it held."""
    lease: Any
    if kind_name == "RedlockLock":
        with RedlockClient(urls, core=core, key_prefix=key_prefix, node_timeout=NODE_TIMEOUT) as redlock:
            lease = redlock.try_acquire(name, 30, token=token)
    elif kind_name == "AsyncLock":
        async def take() -> Any:
            async with AsyncLockClient.from_url(urls[0], core=core, key_prefix=key_prefix) as client:
                return await client.try_acquire(name, 30, token=token)

        lease = asyncio.run(take())
    else:
        with LockClient.from_url(urls[0], core=core, key_prefix=key_prefix) as client:
            lease = client.try_acquire(name, 30, token=token)
    return {"pid": os.getpid(), "taken": lease is not None}


def test_adopt_a_lock_taken_in_another_process(kind: Kind) -> None:
    token = secrets.token_bytes(16)
    args = (kind.name, kind.urls, kind.core, kind.key_prefix, "adopt", token)
    (report,) = run_workers(take_elsewhere, [args], timeout=30)
    assert report["pid"] != os.getpid()
    assert report["taken"] is True
    assert all(raw.get(kind.key("adopt")) == token for raw in kind.raws)

    lease = kind.client.lease("adopt", token)
    assert lease.valid_for() == 0
    if kind.is_redlock:
        # A Redlock extend needs validity left, and an adopted lease has none.
        assert kind.run(kind.client.extend(lease, 10)) is False
        assert all(raw.get(kind.key("adopt")) == token for raw in kind.raws)
    else:
        assert kind.run(kind.client.extend(lease, 10)) is True
        assert all(9_000 < pttl <= 10_000 for pttl in kind.pttls("adopt"))
        assert 9.0 < lease.valid_for() <= 10.0
    assert kind.run(kind.client.release(lease)) is True
    assert kind.pttls("adopt") == [-2] * len(kind.raws), "release must delete the key on every server"


def test_adopt_a_lock_taken_by_another_client(kind: Kind) -> None:
    token = secrets.token_bytes(16)
    other = kind.new_client()
    taken = kind.run(other.try_acquire("adopt2", 30, token=token))
    assert taken is not None

    lease = kind.client.lease("adopt2", token)
    assert lease.valid_for() == 0
    if kind.is_redlock:
        assert kind.run(kind.client.extend(lease, 10)) is False
    else:
        assert kind.run(kind.client.extend(lease, 10)) is True
        assert all(9_000 < pttl <= 10_000 for pttl in kind.pttls("adopt2"))
    assert kind.run(kind.client.release(lease)) is True
    assert kind.pttls("adopt2") == [-2] * len(kind.raws)


def test_the_decorator_refuses_what_would_run_after_the_release(client: LockClient) -> None:
    """``@client.lock(...)`` on an ``async def`` held the lock only while the coroutine object
    was made, then released it before the body ran: two gathered calls ran the "locked" body
    at once. Generator functions had the same flaw. Refused, as the asyncio Lock refuses a plain
    function."""

    async def coroutine_function() -> None: ...

    def generator_function() -> Iterator[int]:
        yield 1

    async def async_generator_function() -> AsyncIterator[int]:
        yield 1

    for func in (coroutine_function, generator_function, async_generator_function):
        with pytest.raises(InvalidArgumentTypeError) as raised:
            client.lock("decorated", 5)(func)  # type: ignore[arg-type]
        assert raised.value.argument == "func"


def test_the_decorator_refuses_what_cannot_be_called(client: LockClient) -> None:
    """``lock(42)`` was taken for a function: each call then took the lock and released it only
    to fail calling 42. Refused when decorating."""
    with pytest.raises(InvalidArgumentTypeError) as raised:
        client.lock("decorated", 5)(42)  # type: ignore[arg-type]
    assert raised.value.argument == "func" and "callable" in str(raised.value)
