"""Interrupting a threaded client call at a chosen point, as a Ctrl-C would."""

from __future__ import annotations

from typing import Any

import pytest

from _eventually import eventually
from turbolock._sync import executor as executor_module


def interrupt_wait(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threaded executor raises KeyboardInterrupt as it encodes a ``WAIT`` (a Ctrl-C during
    the WAIT round trip, after every acquire's reply was read); how many times it did."""
    real = executor_module._encoded
    hits = [0]

    def encoded(conn: Any, command: tuple[bytes, ...]) -> bytes:
        if command and command[0] == b"WAIT":
            hits[0] += 1
            raise KeyboardInterrupt
        return real(conn, command)

    monkeypatch.setattr(executor_module, "_encoded", encoded)
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
