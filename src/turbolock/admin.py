"""``turbolock locks ...``: the operator's view of the locks on a server, for the stuck lock at
3 a.m. Lists held locks under a key prefix with the time they have left (SCAN, never KEYS, so a
large keyspace is not blocked), shows one, and deletes one by force after confirmation. Works on
a plain server and on a Redis Cluster (every master is scanned). Tokens are never printed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import redis

from turbolock._flows.client_settings import DEFAULT_KEY_PREFIX
from turbolock._wire.fair_scripts import QUEUE_KEYS
from turbolock._wire.scripts import FENCE_SUFFIX, fence_counter
from turbolock._wire.slots import slot_base
from turbolock.errors import InvalidArgumentError
from turbolock.options import options_from_url, redis_py_url

SCAN_COUNT = 1000


@dataclass(frozen=True)
class HeldLock:
    name: str
    remaining: float
    """Seconds left."""

    @property
    def left(self) -> str:
        return f"{self.remaining:.3f} s"

    def line(self) -> str:
        return f"{shown(self.name)}\t{self.left}"


def shown(name: str) -> str:
    """``name`` for one line of output: a character that is not printable (a tab, a newline, a
    byte that is not UTF-8) escaped, so a name cannot pass for another line or another lock."""
    name = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if name.isprintable():
        return name
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in name)


def raw(text: str, argument: str) -> bytes:
    """A name or pattern from the command line as the bytes it was given (a name that is not
    UTF-8 arrives as surrogate escapes)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise InvalidArgumentError(argument, "cannot be encoded as bytes") from None


def connect(url: str) -> Any:
    """redis-py on ``url``: a ``RedisCluster`` when the server is a cluster node (checked first,
    so a bad URL fails with turbolock's clear error before any connection)."""
    options_from_url(url)
    url = redis_py_url(url)
    plain = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0)
    try:
        # INFO cluster, not INFO server's redis_mode: Valkey 8 names that field server_mode.
        enabled = plain.info("cluster").get("cluster_enabled")
    except BaseException:
        plain.close()
        raise
    if enabled != 1:
        return plain
    plain.close()
    return redis.RedisCluster.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0)


NO_TTL = """Every lock has a ttl; a key under the prefix without one is no lock. A lock's own keys
(``OWN_KEY_SUFFIXES``: a fence counter, a fair lock's queue and when its waiters asked, the lock's
key and a suffix when it has a hash tag) and a prefix's fence counter (``{<prefix>}:fence``, under
the empty prefix only) are no locks either, ttl or not: a queue would lose its waiters' places,
and a counter is never deleted. Neither is listed or released."""

OWN_KEY_SUFFIXES = (FENCE_SUFFIX, *QUEUE_KEYS)


def _own_key(key: bytes) -> bool:
    """Whether ``key`` is a lock's own key or a fence counter (``NO_TTL``), not a lock."""
    if key == fence_counter(b""):  # the empty prefix's ('{}' is no hash tag: slot_base differs)
        return True
    for suffix in OWN_KEY_SUFFIXES:
        if key.endswith(suffix):
            base = key[:-len(suffix)]
            if slot_base(base) == base:
                return True
    return False


def _decode(name: bytes) -> str:
    return name.decode("utf-8", "backslashreplace")


def held_locks(server: Any, prefix: str = DEFAULT_KEY_PREFIX, match: str = "*",
               limit: int | None = None) -> Iterator[HeldLock]:
    """The keys under ``prefix`` whose name (after it) matches the glob ``match``, with their
    remaining ttl, as SCAN finds them (a lock taken or freed meanwhile may or may not show); at
    most ``limit`` locks."""
    return islice(_held_locks(server, prefix, match), limit)


def _held_locks(server: Any, prefix: str, match: str) -> Iterator[HeldLock]:
    pattern = _escape_glob(raw(prefix, "--prefix")) + raw(match, "--match")
    start = len(raw(prefix, "--prefix"))
    batch: list[bytes] = []
    for key in server.scan_iter(match=pattern, count=SCAN_COUNT):
        if _own_key(key):
            continue
        batch.append(key)
        if len(batch) == SCAN_COUNT:
            yield from _with_ttls(server, start, batch)
            batch = []
    yield from _with_ttls(server, start, batch)


def _with_ttls(server: Any, start: int, keys: list[bytes]) -> Iterator[HeldLock]:
    if not keys:
        return
    pipe = server.pipeline(transaction=False)
    for key in keys:
        pipe.pttl(key)
    for key, pttl in zip(keys, pipe.execute(), strict=True):
        if pttl < 0:  # expired or released since the scan saw it, or no lock (NO_TTL)
            continue
        yield HeldLock(_decode(key[start:]), pttl / 1000.0)


def _escape_glob(text: bytes) -> bytes:
    """``text`` as a literal in a Redis glob (a prefix may hold ``*``, ``?``, ``[`` or ``\\``)."""
    return b"".join(b"\\" + bytes((byte,)) if byte in b"*?[]\\" else bytes((byte,)) for byte in text)


def _key(prefix: str, name: str) -> bytes:
    return raw(prefix, "--prefix") + raw(name, "name")


def inspect(server: Any, name: str, prefix: str = DEFAULT_KEY_PREFIX) -> HeldLock | None:
    """The lock ``name`` if anyone holds it, else None (a key without a ttl, or a lock's own key,
    is no lock: ``NO_TTL``)."""
    key = _key(prefix, name)
    if _own_key(key):
        return None
    pttl = server.pttl(key)
    if pttl < 0:
        return None
    return HeldLock(name, pttl / 1000.0)


def force_release(server: Any, name: str, prefix: str = DEFAULT_KEY_PREFIX) -> bool:
    """Delete the lock ``name`` whoever holds it; whether there was one to delete. Its holder is
    not told: it finds the lock gone at its next renewal, extend or check; its waiters are. A key
    without a ttl is never deleted, nor a lock's own key (``NO_TTL``)."""
    key = _key(prefix, name)
    if _own_key(key) or server.pttl(key) < 0:
        return False
    if not server.delete(key):
        return False
    try:  # its waiters hear it as they hear a release (the release script's SPUBLISH)
        server.execute_command("SPUBLISH", key, b"")
    except redis.ResponseError:  # a server before 7.0: its waiters find the lock free by polling
        pass
    return True


def confirm_release(server: Any, name: str, prefix: str, yes: bool, ask: Callable[[str], str],
                    say: Callable[[str], None]) -> int:
    """The CLI's ``release --force``: the exit code (0 released, 1 nothing held or not confirmed)."""
    held = inspect(server, name, prefix)
    if held is None:
        say(f"{shown(name)}: not held")
        return 1
    if not yes:
        answer = ask(f"Release {shown(name)!r} ({held.left} left) by force? Its holder is not told and may "
                     "still be working under it. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            say("not released")
            return 1
    if not force_release(server, name, prefix):
        say(f"{shown(name)}: gone before it could be released")
        return 1
    say(f"{shown(name)}: released")
    return 0

