"""Interrupting a threaded client call at a chosen point, as a Ctrl-C would."""

from __future__ import annotations

from typing import Any

import pytest

from _eventually import eventually
from turbolock._sync import executor as executor_module
from turbolock._sync.connection import Connection


def interrupt_wait(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threaded executor raises KeyboardInterrupt as it reads a ``WAIT``'s reply (a Ctrl-C
    during the WAIT round trip, after every acquire's reply was read and handed on: the WAIT goes
    in the last chunk's write); how many times it did."""
    real_run, real_read = executor_module.run_chunks, Connection.read
    armed, hits = [False], [0]

    def read(conn: Connection, count: int, deadline: float) -> list[object]:
        if armed[0]:
            armed[0] = False
            hits[0] += 1
            raise KeyboardInterrupt
        return real_read(conn, count, deadline)

    def run_chunks(conn: Connection, count: int, chunk_size: int, encode: Any, timeout: float,
                   on_replies: Any, *args: Any, **kwargs: Any) -> list[object]:
        if kwargs.get("epilogue_replies"):
            handed = on_replies

            def on_replies(start: int, replies: list[object]) -> None:
                handed(start, replies)
                armed[0] = start + len(replies) == count  # the next read is the WAIT's

        return real_run(conn, count, chunk_size, encode, timeout, on_replies, *args, **kwargs)

    monkeypatch.setattr(executor_module, "run_chunks", run_chunks)
    monkeypatch.setattr(Connection, "read", read)
    return hits


def acquire_interrupted_in_wait(client: Any, names: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``client.acquire_many(names)`` interrupted in its WAIT round trip (``replicas_ack``); back
    once the client's background cleanup has nothing left."""
    hits = interrupt_wait(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        client.acquire_many(names, 30)
    monkeypatch.undo()
    assert hits[0] == 1, "the interrupt did not land in WAIT"
    assert eventually(lambda: client.pending_cleanup == 0, 5.0)
