"""Bad call arguments are refused before anything is sent, with the errors the blocking
RedlockClient raises (type, argument, message), and a ttl that leaves no validity. The
constructor's checks are tested for both clients in ``tests/redlock/test_redlock_validation.py``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
from _async_redlock_workers import TTL
from async_helpers import Runner

from _raw import Raws
from turbolock import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockError,
    RedlockClient,
)
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer, free_port

MakeRedlock = Callable[..., AsyncRedlockClient]


def _nothing_listens(count: int = 3) -> list[str]:
    return [f"redis://127.0.0.1:{free_port()}/0" for _ in range(count)]


def _caught(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except LockError as exc:
        return exc
    raise AssertionError("no error raised")


async def _caught_async(call: Callable[[], Awaitable[Any]]) -> BaseException:
    try:
        await call()
    except LockError as exc:
        return exc
    raise AssertionError("no error raised")


def _same(got: BaseException, expected: BaseException, what: str, message: bool = True) -> None:
    assert type(got) is type(expected), f"{what}: {got!r} where the blocking client raises {expected!r}"
    assert isinstance(got, InvalidArgumentError | InvalidArgumentTypeError), what
    assert got.argument == expected.argument, what  # type: ignore[attr-defined]
    if message:
        assert str(got) == str(expected), what


# -- the calls --------------------------------------------------------------------------------------


def _call_cases(sync: RedlockClient, client: AsyncRedlockClient, sync_lease: Any, async_lease: Any,
                ) -> list[tuple[str, Callable[[], Any], Callable[[], Awaitable[Any]]]]:
    """(what, the blocking call, the asyncio call) pairs that must fail the same way."""

    async def now(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    cases: list[tuple[str, Callable[[], Any], Callable[[], Awaitable[Any]]]] = []
    for name in ["", b"", "x" * 1025, 3, None]:
        cases += [
            (f"try_acquire name={name!r}", lambda n=name: sync.try_acquire(n, 1),
             lambda n=name: client.try_acquire(n, 1)),
            (f"acquire name={name!r}", lambda n=name: sync.acquire(n, 1),
             lambda n=name: client.acquire(n, 1)),
            (f"query name={name!r}", lambda n=name: sync.query(n), lambda n=name: client.query(n)),
            (f"lock name={name!r}", lambda n=name: sync.lock(n, 1), lambda n=name: now(client.lock, n, 1)),
            (f"lease name={name!r}", lambda n=name: sync.lease(n, b"t" * 16),
             lambda n=name: now(client.lease, n, b"t" * 16)),
        ]
    for ttl in [None, 0, -1, True, "5", float("nan"), 0.0005, 10**9, 0.002]:
        cases += [
            (f"acquire ttl={ttl!r}", lambda t=ttl: sync.acquire("n", t),
             lambda t=ttl: client.acquire("n", t)),
            (f"acquire_many ttl={ttl!r}", lambda t=ttl: sync.acquire_many(["a"], t),
             lambda t=ttl: client.acquire_many(["a"], t)),
            (f"claim ttl={ttl!r}", lambda t=ttl: sync.acquire_many(["a"], t, limit=1),
             lambda t=ttl: client.acquire_many(["a"], t, limit=1)),
            (f"extend ttl={ttl!r}", lambda t=ttl: sync.extend(sync_lease, t),
             lambda t=ttl: client.extend(async_lease, t)),
            (f"extend_many ttl={ttl!r}", lambda t=ttl: sync.extend_many([sync_lease], t),
             lambda t=ttl: client.extend_many([async_lease], t)),
            *([] if ttl is None else [  # a lock with no ttl takes the default one, renewed
                (f"lock ttl={ttl!r}", lambda t=ttl: sync.lock("n", t),
                 lambda t=ttl: now(client.lock, "n", t))]),
        ]
    for timeout in [-1, "1", float("nan")]:
        cases += [
            (f"acquire timeout={timeout!r}", lambda t=timeout: sync.acquire("n", 1, timeout=t),
             lambda t=timeout: client.acquire("n", 1, timeout=t)),
            (f"lock timeout={timeout!r}", lambda t=timeout: sync.lock("n", 1, timeout=t),
             lambda t=timeout: now(client.lock, "n", 1, timeout=t)),
            (f"Lock.acquire timeout={timeout!r}", lambda t=timeout: sync.lock("n", 1).acquire(timeout=t),
             lambda t=timeout: client.lock("n", 1).acquire(timeout=t)),
        ]
    token = b"t" * 16
    cases += [
        ("short token", lambda: sync.try_acquire("n", 1, token=b"short"),
         lambda: client.try_acquire("n", 1, token=b"short")),
        ("str token", lambda: sync.acquire("n", 1, token="x" * 20),  # type: ignore[arg-type]
         lambda: client.acquire("n", 1, token="x" * 20)),  # type: ignore[arg-type]
        ("lease token", lambda: sync.lease("n", b"short"), lambda: now(client.lease, "n", b"short")),
        ("lock token", lambda: sync.lock("n", 1, token=b"short"),
         lambda: now(client.lock, "n", 1, token=b"short")),
        ("max_extensions", lambda: sync.try_acquire("n", 1, max_extensions=-1),
         lambda: client.try_acquire("n", 1, max_extensions=-1)),
        ("max_extensions type", lambda: sync.acquire("n", 1, max_extensions=1.5),  # type: ignore[arg-type]
         lambda: client.acquire("n", 1, max_extensions=1.5)),  # type: ignore[arg-type]
        ("lock max_extensions", lambda: sync.lock("n", 1, max_extensions=-1),
         lambda: now(client.lock, "n", 1, max_extensions=-1)),
        ("on_lost without renewal", lambda: sync.try_acquire("n", 1, on_lost=print),
         lambda: client.try_acquire("n", 1, on_lost=print)),
        ("on_lost not callable", lambda: sync.try_acquire("n", 1, auto_renew=True, on_lost=3),  # type: ignore[arg-type]
         lambda: client.try_acquire("n", 1, auto_renew=True, on_lost=3)),  # type: ignore[arg-type]
        ("auto_renew", lambda: sync.try_acquire("n", 1, auto_renew="yes"),  # type: ignore[arg-type]
         lambda: client.try_acquire("n", 1, auto_renew="yes")),  # type: ignore[arg-type]
        ("blocking", lambda: sync.acquire("n", 1, blocking=1),  # type: ignore[arg-type]
         lambda: client.acquire("n", 1, blocking=1)),  # type: ignore[arg-type]
        ("blocking with a timeout", lambda: sync.acquire("n", 1, blocking=False, timeout=1),
         lambda: client.acquire("n", 1, blocking=False, timeout=1)),
        ("lock blocking", lambda: sync.lock("n", 1, blocking=1),  # type: ignore[arg-type]
         lambda: now(client.lock, "n", 1, blocking=1)),  # type: ignore[arg-type]
        ("release None", lambda: sync.release(None), lambda: client.release(None)),  # type: ignore[arg-type]
        ("extend str", lambda: sync.extend("x", 1), lambda: client.extend("x", 1)),  # type: ignore[arg-type]
        ("check None", lambda: sync.check(None), lambda: client.check(None)),  # type: ignore[arg-type]
        ("duplicate names", lambda: sync.acquire_many(["a", "a"], 1),
         lambda: client.acquire_many(["a", "a"], 1)),
        ("str names", lambda: sync.acquire_many("ab", 1), lambda: client.acquire_many("ab", 1)),
        ("int name in bulk", lambda: sync.acquire_many(["a", 7], 1),  # type: ignore[list-item]
         lambda: client.acquire_many(["a", 7], 1)),  # type: ignore[list-item]
        ("tokens count", lambda: sync.acquire_many(["a", "b"], 1, tokens=[token]),
         lambda: client.acquire_many(["a", "b"], 1, tokens=[token])),
        ("tokens short", lambda: sync.acquire_many(["a", "b"], 1, tokens=[token, b"t"]),
         lambda: client.acquire_many(["a", "b"], 1, tokens=[token, b"t"])),
        ("release_many None", lambda: sync.release_many([None]),  # type: ignore[list-item]
         lambda: client.release_many([None])),  # type: ignore[list-item]
        ("extend_many str", lambda: sync.extend_many(["x"], 1),  # type: ignore[list-item]
         lambda: client.extend_many(["x"], 1)),  # type: ignore[list-item]
        ("bulk on_lost without renewal", lambda: sync.acquire_many(["a"], 1, on_lost=print),
         lambda: client.acquire_many(["a"], 1, on_lost=print)),
    ]
    for change, argument in [({"limit": 0}, "limit"), ({"limit": -3}, "limit"), ({"limit": 2.0}, "limit"),
                             ({"limit": "2"}, "limit"), ({"limit": True}, "limit"),
                             ({"limit": 2, "all_or_nothing": True}, "all_or_nothing"),
                             ({"all_or_nothing": "yes"}, "all_or_nothing"),
                             ({"limit": 2, "all_or_nothing": "no"}, "all_or_nothing")]:
        cases.append((f"claim {change}", lambda c=change: sync.acquire_many(["a", "b", "c"], 1, **c),
                      lambda c=change: client.acquire_many(["a", "b", "c"], 1, **c)))
        assert argument in change
    return cases


def test_bad_call_arguments_fail_like_the_blocking_client_before_sending(arun: Runner,
                                                                         core_name: str) -> None:
    # Nothing listens on these ports: any attempt to send would fail with a connection error
    # (or a no-quorum result) instead of the error expected.
    urls = _nothing_listens()

    async def body() -> None:
        with RedlockClient(urls, core=core_name) as sync:
            async with AsyncRedlockClient(urls, core=core_name) as client:
                sync_lease = sync.lease("held", b"t" * 16)
                async_lease = client.lease("held", b"t" * 16)
                cases = _call_cases(sync, client, sync_lease, async_lease)
                for what, blocking, asynchronous in cases:
                    _same(await _caught_async(asynchronous), _caught(blocking), what)
                assert len(cases) > 100
                missing = await _caught_async(lambda: client.wait_lost(None))  # type: ignore[arg-type]
                assert isinstance(missing, InvalidArgumentTypeError) and missing.argument == "lease"

    arun(body)


def test_a_ttl_without_room_for_validity_is_refused(arun_asyncio: Runner, three: list[RedisServer],
                                                    core_name: str, key_prefix: str) -> None:
    urls = [server.url for server in three]

    async def body() -> None:
        async with AsyncRedlockClient(urls, core=core_name, key_prefix=key_prefix) as client:
            # 2 ms: the drift allowance alone (2 ms + 1%) takes it all.
            with pytest.raises(InvalidArgumentError, match="no validity") as info:
                await client.try_acquire("short", 0.002)
            assert info.value.argument == "ttl"
            # 40 ms is fine on its own (the node timeout shrinks to 4 ms) but not with a 50 ms one.
            # Accepted, not refused: a master slower than 4 ms under load may fail an attempt.
            lease = None
            for _ in range(5):
                lease = await client.try_acquire("short", 0.04)
                if lease is not None:
                    break
            assert lease is not None and await client.release(lease)
        async with AsyncRedlockClient(urls, core=core_name, key_prefix=key_prefix,
                                      node_timeout=0.05) as client:
            for call in (lambda: client.try_acquire("short", 0.04),
                         lambda: client.acquire_many(["a", "b"], 0.04)):
                with pytest.raises(InvalidArgumentError, match="node_timeout"):
                    await call()
            with pytest.raises(InvalidArgumentError, match="node_timeout"):
                client.lock("short", 0.04)
            lease = await client.try_acquire("short", 0.1)
            assert lease is not None
            with pytest.raises(InvalidArgumentError, match="no validity"):
                await client.extend(lease, 0.04)
            assert await client.release(lease)

    arun_asyncio(body)


def _processed(raw: redis.Redis) -> int:
    return int(raw.info("stats")["total_commands_processed"])


def test_nothing_reaches_the_masters_on_bad_input(arun_asyncio: Runner, three: list[RedisServer],
                                                  make_async_redlock: MakeRedlock, raws: Raws) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as client:
            lease = await client.try_acquire("held", TTL)
            assert lease is not None
            before = [_processed(raw) for raw in connections]
            bad: list[Callable[[], Awaitable[Any]]] = [
                lambda: client.extend(lease, 0),
                lambda: client.extend(lease, -1, additive=True),
                lambda: client.extend_many([lease, lease], TTL),
                lambda: client.release_many([lease, None]),  # type: ignore[list-item]
                lambda: client.acquire_many(["a", "b", "a"], TTL),
                lambda: client.acquire_many(["a", ""], TTL, limit=1),
                lambda: client.try_acquire("n", TTL, auto_renew=True, on_lost=5),  # type: ignore[arg-type]
                lambda: client.lock("n", TTL).acquire(timeout=-1),
            ]
            for call in bad:
                error = await _caught_async(call)
                assert isinstance(error, InvalidArgumentError | InvalidArgumentTypeError), error
            after = [_processed(raw) for raw in connections]
            assert [b - a for a, b in zip(before, after, strict=True)] == [1, 1, 1], \
                "a command reached a master despite bad input (1 is the INFO that counted)"
            assert await client.release(lease)

    arun_asyncio(body)

