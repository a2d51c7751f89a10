"""What a flow asks of its driver. A flow is a generator holding one operation's logic, with no
I/O in it: it yields these steps and gets each one's result back (or its exception thrown in).
The threaded driver performs them by blocking, the asyncio driver by awaiting (psycopg 3's
``generators.py`` and ``waiting.py`` work the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class Sleep(NamedTuple):
    """Pause for ``seconds`` (other tasks run meanwhile under asyncio)."""

    seconds: float


CallStep = tuple[Callable[..., Any], tuple[Any, ...], "dict[str, Any] | None"]


def Call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> CallStep:
    """Call ``fn(*args, **kwargs)`` on the front end: its result under threads, the awaited
    result under asyncio (a flow written once uses the sync and the async client's methods).

    A plain tuple, not a class: a lock's release is one such step, and building a named tuple
    cost more than the rest of the driver (measured: 1.3 us a flow, 0.2 us for the call itself).
    """
    return (fn, args, kwargs)


# A fan-out to a Redlock's masters is a Call too, of the client's ``_fan_one(encode, timeout,
# script=None, only=None)`` (one command to every master, or those in ``only``: the result is
# ``(replies, errors)``, one entry per master) or ``_fan_many(items, encode, timeout, chunk_size,
# script=None, reencode=None, on_chunk=None, only=None)`` (items 0..items-1 in chunks, each chunk
# encoded once for all masters: the result is an ``Outcome``); see ``_redlock.fanout`` and
# ``_aio.fanout``. Plain calls (bound partials), not step classes: step objects, their dispatch
# and a method around each fan-out cost a Redlock acquire+release pair 6% more instructions.


class Outcome:
    """What each master replied: ``replies[m][i]`` for item ``i`` on master ``m`` (a reply,
    ``UNKNOWN`` or ``NOT_SENT``), and why a master failed (``errors[m]``, None when it did not)."""

    __slots__ = ("replies", "errors", "started")

    def __init__(self, replies: list[list[object]], errors: list[str | None], started: list[float]) -> None:
        self.replies = replies
        self.errors = errors
        self.started = started
        """Per chunk: the monotonic time before its first write (validity is counted from it)."""


class Gather(NamedTuple):
    """Make every call at once (threads: the first on the caller's thread, the others on a small
    pool; asyncio: concurrently); the result is each call's ``(True, value)`` or ``(False,
    exception)``, in order. A Redis Cluster's bulk calls send every master its share this way."""

    calls: tuple[CallStep, ...]
    abandoned: Callable[[int, tuple[bool, Any]], None] | None = None
    """Gets ``(index, outcome)`` of each call that finishes after the caller was interrupted
    (threads: a KeyboardInterrupt in the first call leaves the others running on the pool):
    what a bulk acquire's other shares took, for the flow to hand over."""


Step = Sleep | CallStep | Gather
Flow = Generator[Step, Any, T]
