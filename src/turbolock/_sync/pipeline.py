"""Sending many commands over one connection in chunks, two chunks in flight at a time.

With one chunk in flight the client idles while the server works and the server idles while
the client encodes; a second chunk written before the first one's replies are read keeps
both busy. Redis buffers replies for a normal client without limit, so this cannot deadlock.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from turbolock._sync.connection import Connection
from turbolock._wire.outcomes import WINDOW, Encoder, ReplyHandler, ReplyShape

EPILOGUE_GRACE = 0.002
"""Seconds an epilogue's reply (sent in the last chunk's write, so due by its deadline) still
gets once the caller's work on that chunk's replies ran past it: already here, it is read."""


class PipelineBroken(Exception):
    """The connection failed mid-way: items before ``replied`` have replies, items from
    ``replied`` to ``sent`` were sent without a reply (outcome unknown), the rest were never sent.

    ``handing`` is ``(start, replies)`` of a chunk read but perhaps not wholly handed to
    ``on_replies`` when the call was interrupted there (a KeyboardInterrupt between two of its
    leases); None otherwise."""

    def __init__(self, cause: BaseException, replied: int, sent: int,
                 handing: tuple[int, list[object]] | None = None) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.replied = replied
        self.sent = sent
        self.handing = handing


def run_chunks(conn: Connection, count: int, chunk_size: int, encode: Encoder, timeout: float,
               on_replies: ReplyHandler, prologue: bytes = b"", prologue_replies: int = 0,
               deadline: float = math.inf, current: Callable[[], bool] | None = None,
               shape: ReplyShape | None = None, epilogue: bytes = b"",
               epilogue_replies: int = 0, since: float | None = None) -> list[object]:
    """Send items 0..count-1 in chunks; ``on_replies(start, replies)`` gets each chunk's replies
    while the server already works on the next chunk.

    ``prologue`` (e.g. SCRIPT LOAD) goes out in front of the first chunk, ``epilogue`` (WAIT)
    behind the last one, in its write and read by its deadline; their replies are returned, in
    that order (none of the epilogue's when the items were cut short and it never went out).
    Each chunk's send and read has its own deadline of ``timeout`` seconds, and none goes past
    ``deadline``. When ``current()`` turns False (the pool dropped the connection's server: a
    failover), no further chunk is sent; the chunks sent are still read, the rest left unsent.
    ``shape``: items that answer several replies each (transactions), read as one per item.
    ``since``: the first chunk's deadline counts from then (the call waited for its connection
    to open: that is part of its first ``timeout``).
    """
    buf = conn.buffer
    inflight: deque[tuple[int, int]] = deque()
    next_start = 0
    replied = 0
    head: list[object] = []
    handing: tuple[int, list[object]] | None = None
    epilogue_sent = False
    due = deadline
    rest = deadline
    if since is not None:  # the first chunk's send and read: by the first timeout, connect included
        deadline = min(deadline, since + timeout)
    try:
        while replied < count:
            while len(inflight) < WINDOW and next_start < count:
                stop = min(count, next_start + chunk_size)
                encode(buf, next_start, stop)
                if next_start and current is not None and not current():
                    buf.clear()
                    count = next_start
                    break
                data = buf.take()
                if prologue:
                    data, prologue = prologue + data, b""
                if stop == count and epilogue:
                    data, epilogue = data + epilogue, b""
                    epilogue_sent = True
                try:
                    conn.send(data, min(time.monotonic() + timeout, deadline))
                except BaseException:
                    if conn.written:  # cut off part-way: the commands that went out may run
                        next_start = stop
                    raise
                inflight.append((next_start, stop))
                next_start = stop
            if prologue_replies:
                head = conn.read(prologue_replies, min(time.monotonic() + timeout, deadline))
                prologue_replies = 0
            start, stop = inflight.popleft()
            due = min(time.monotonic() + timeout, deadline)
            if since is not None:  # the first chunk read: the next ones get a whole timeout each
                deadline, since = rest, None
            if shape is None:
                replies = conn.read(stop - start, due)
            else:
                replies = shape.fold(start, stop, conn.read(shape.count(start, stop), due))
            handing = (start, replies)
            replied = stop
            on_replies(start, replies)
            handing = None
        if epilogue_sent:  # due with the last chunk: the caller's on_replies may have used the time
            head += conn.read(epilogue_replies, max(due, time.monotonic() + EPILOGUE_GRACE))
    except BaseException as exc:
        buf.clear()
        raise PipelineBroken(exc, replied, next_start, handing) from None
    return head
