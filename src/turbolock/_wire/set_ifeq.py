"""Extend by ``SET key token IFEQ token PX ttl`` where the server offers it (Valkey 8.1, Redis 8.4).

One command compares the value with the token and sets the ttl, as the EXTEND script does, for a
third of the server's time (``benchmarks.ifeq_compare``; README, Benchmarks). A connection learns
whether its server offers it from the handshake's HELLO (``offers``). Its replies read as the
script's: OK is 1 (extended), nil is 0 (not ours); an error (a key of another type) stays one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turbolock._wire.outcomes import Encoder

SINCE = {b"valkey": (8, 1), b"redis": (8, 4)}
"""The first version of each server that has ``SET ... IFEQ``."""


def offers(hello: object) -> bool:
    """Whether a ``HELLO 2`` reply names a server with ``SET ... IFEQ`` (an error reply: no)."""
    if not isinstance(hello, list):
        return False
    fields = dict(zip(hello[::2], hello[1::2], strict=False))
    since = SINCE.get(fields.get(b"server"))  # type: ignore[arg-type]
    version = fields.get(b"version")
    if since is None or not isinstance(version, bytes):
        return False
    try:
        have = tuple(int(part) for part in version.split(b".")[:2])
    except ValueError:
        return False
    return have >= since


def append(buf: Any, key: bytes, token: bytes, ttl_ms: int) -> None:
    """Queue ``SET key token IFEQ token PX ttl_ms``: EXTEND where the server offers it."""
    buf.append_command((b"SET", buf.key_prefix + key, token, b"IFEQ", token, b"PX", ttl_ms))


def encoder(keys: Sequence[bytes], tokens: Sequence[bytes], ttl_ms: int) -> Encoder:
    """One ``SET ... IFEQ`` per lease (``extend_many`` on a server that offers it)."""
    def encode(buf: Any, start: int, stop: int) -> None:
        for i in range(start, stop):
            append(buf, keys[i], tokens[i], ttl_ms)

    return encode


def as_script_reply(reply: object) -> object:
    """A ``SET ... IFEQ`` reply as the EXTEND script's: 1, 0, or what it was (an error)."""
    if reply == b"OK":
        return 1
    if reply is None:
        return 0
    return reply


def as_script_replies(replies: list[object]) -> list[object]:
    return [as_script_reply(reply) for reply in replies]
