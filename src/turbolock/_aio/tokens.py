"""Random lock tokens drawn in batches: one ``os.urandom`` call per 256 acquires instead of one each.

A token source belongs to one client (and so to one event loop): never shared between threads,
whose interleaved draws could hand out one token twice. A forked child drops what its parent had
drawn, so parent and child never hold the same token.
"""

from __future__ import annotations

import os
import weakref

from turbolock._wire.validate import TOKEN_BYTES

_BATCH = 256

_sources: weakref.WeakSet[TokenSource] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for source in list(_sources):
        source.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


class TokenSource:
    __slots__ = ("_blob", "_next", "__weakref__")

    def __init__(self) -> None:
        self._blob = b""
        self._next = 0
        _sources.add(self)

    def take(self) -> bytes:
        """A fresh 16-byte token, as random as ``secrets.token_bytes(16)``."""
        start = self._next
        if start >= len(self._blob):
            self._blob = os.urandom(TOKEN_BYTES * _BATCH)
            start = 0
        self._next = start + TOKEN_BYTES
        return self._blob[start:start + TOKEN_BYTES]

    def clear(self) -> None:
        self._blob = b""
        self._next = 0
