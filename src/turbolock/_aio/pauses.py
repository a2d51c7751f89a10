"""The pauses of an asyncio client's blocking acquires between attempts (polling, a Redlock
retry's random delay), which its close() ends at once: a waiter stops waiting as the client
closes, not one pause later."""

from __future__ import annotations

import asyncio


def _end(pause: asyncio.Future[None]) -> None:
    if not pause.done():
        pause.set_result(None)


class Pauses:
    """Pauses that ``end_all()`` (close) ends, and every later one at once."""

    __slots__ = ("_under_way", "_ended")

    def __init__(self) -> None:
        self._under_way: set[asyncio.Future[None]] = set()
        self._ended = False

    async def pause(self, seconds: float) -> None:
        if self._ended:
            return
        loop = asyncio.get_running_loop()
        pause: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(seconds, _end, pause)
        self._under_way.add(pause)
        try:
            await pause
        finally:
            timer.cancel()
            self._under_way.discard(pause)

    def end_all(self) -> None:
        self._ended = True
        for pause in list(self._under_way):
            _end(pause)
