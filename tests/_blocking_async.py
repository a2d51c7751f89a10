"""An asyncio client driven from plain code, so that a test written for a blocking client also
runs, unchanged, on its asyncio twin. Its event loop runs in a thread of its own the whole time,
as in an asyncio service: background work (renewal, clean-ups) goes on between calls."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

CALL_LIMIT = 60.0
"""No call made through ``Blocking`` waits longer than this (a hung test fails instead)."""


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="blocking-async", daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(CALL_LIMIT)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(CALL_LIMIT)
        self.loop.close()


class Blocking:
    """``Blocking(make)``: the object ``make()`` returns (made on the loop), each awaitable its
    methods return run to completion; ``lock(...)`` gives its Lock object the same way."""

    def __init__(self, make: Callable[[], Any], loop: _LoopThread | None = None) -> None:
        self._runner = loop or _LoopThread()
        self._owns_loop = loop is None

        async def made() -> Any:
            return make()

        self._target = self._runner.run(made())

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            async def on_loop() -> Any:
                result = attribute(*args, **kwargs)
                return await result if inspect.isawaitable(result) else result

            return self._runner.run(on_loop())

        return call

    def lock(self, *args: Any, **kwargs: Any) -> Blocking:
        return Blocking(lambda: self._target.lock(*args, **kwargs), self._runner)

    def close(self) -> None:
        if self._runner.loop.is_closed():
            return  # closed already (a test closed it, then its fixture)
        self._runner.run(self._target.close())
        if self._owns_loop:
            self._runner.stop()


FRONTS = ["threads", "asyncio"]
"""The params of a fixture that runs a test on a blocking client and on its asyncio twin."""


class Fronts:
    """The clients of one test on one front end: ``make(**options)`` is ``make_blocking(**options)``
    for ``"threads"``, ``Blocking`` around ``make_async(**options)`` for ``"asyncio"``, with
    ``defaults`` under the options; ``close()`` closes every client made."""

    def __init__(self, front: str, make_blocking: Callable[..., Any], make_async: Callable[..., Any],
                 **defaults: Any) -> None:
        self.front = front
        self.make_blocking = make_blocking
        self.make_async = make_async
        self.defaults = defaults
        self.made: list[Any] = []

    @classmethod
    def at(cls, front: str, url: str, **defaults: Any) -> Fronts:
        """LockClients of one server (``url``), or their asyncio twins."""
        from turbolock import LockClient
        from turbolock.asyncio import AsyncLockClient

        return cls(front, partial(LockClient.from_url, url), partial(AsyncLockClient.from_url, url),
                   **defaults)

    def make(self, **options: Any) -> Any:
        options = {**self.defaults, **options}
        if self.front == "threads":
            client = self.make_blocking(**options)
        else:
            client = Blocking(lambda: self.make_async(**options))
        self.made.append(client)
        return client

    def close(self) -> None:
        for client in self.made:
            client.close()


def close_only(client: Any) -> None:
    """Close ``client``, a blocking one or an asyncio one through ``Blocking`` (whose loop keeps
    running, so a test may still call the closed client)."""
    target = getattr(client, "_target", None)
    if target is None:
        client.close()
    else:
        client._runner.run(target.close())
