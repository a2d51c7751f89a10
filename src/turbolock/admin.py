"""``turbolock locks ...``: the operator's view of the locks on a server, for the stuck lock at
3 a.m. Lists held locks under a key prefix with the time they have left (SCAN, never KEYS, so a
large keyspace is not blocked), shows one, and deletes one by force after confirmation. Works on
a plain server and on a Redis Cluster (every master is scanned). Tokens are never printed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.client import NEVER_DECODE
from redis.retry import Retry

from turbolock._flows.client_settings import DEFAULT_KEY_PREFIX
from turbolock._wire.scripts import RELEASE, released
from turbolock._wire.validate import encode_name
from turbolock.errors import InvalidArgumentError, InvalidArgumentTypeError
from turbolock.options import options_from_url, redis_py_url

SCAN_COUNT = 1000


@dataclass(frozen=True)
class HeldLock:
    name: str
    remaining: float
    """Seconds left."""
    holder: bytes = field(default=b"", repr=False, compare=False)
    """The holder's token (never printed): what a release by force deletes only while it is there."""

    @property
    def left(self) -> str:
        return f"{self.remaining:.3f} s"

    def line(self) -> str:
        return f"{shown(self.name)}\t{self.left}"


def shown(name: str, encoding: str | None = None) -> str:
    """``name`` for one line of output: a character that is not printable (a tab, a newline, a
    byte that is not UTF-8) or that the output's ``encoding`` (standard output's by default)
    cannot carry escaped, and a backslash doubled, so a name cannot pass for another line or
    another lock (``a\tb`` with a tab and with a backslash print apart) nor end the command."""
    data = name.encode("utf-8", "surrogateescape").replace(b"\\", b"\\\\")
    name = data.decode("utf-8", "backslashreplace")
    if not name.isprintable():
        name = "".join(char if char.isprintable() else repr(char)[1:-1] for char in name)
    encoding = encoding or getattr(sys.stdout, "encoding", None) or "utf-8"
    return name.encode(encoding, "backslashreplace").decode(encoding)


def raw(text: str | bytes, argument: str) -> bytes:
    """A name or pattern from the command line as the bytes it was given (a name that is not
    UTF-8 arrives as surrogate escapes); bytes as they are, as the clients take them."""
    if isinstance(text, bytes):
        return text
    if not isinstance(text, str):
        raise InvalidArgumentTypeError(argument, f"must be str or bytes, not {type(text).__name__}")
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise InvalidArgumentError(argument, "cannot be encoded as bytes") from None


def connect(url: str) -> Any:
    """redis-py on ``url``: a ``RedisCluster`` when the server is a cluster node (checked first,
    so a bad URL fails with turbolock's clear error before any connection)."""
    options_from_url(url)
    url = redis_py_url(url)
    plain = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0, retry=_once())
    try:
        # INFO cluster, not INFO server's redis_mode: Valkey 8 names that field server_mode.
        enabled = plain.info("cluster").get("cluster_enabled")
    except BaseException:
        plain.close()
        raise
    if enabled != 1:
        return plain
    plain.close()
    return redis.RedisCluster.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0, retry=_once())


def _once() -> Retry:
    """One attempt per command: redis-py's cluster client retried a stopped master's timeouts,
    reading the slot map again between them, for most of a minute."""
    return Retry(NoBackoff(), 0)


NO_TTL = """A lock is a string with a ttl: nothing else under the prefix is listed or released. A
fence counter (a prefix's or, on Redis Cluster, a name's) has no ttl, and a fair lock's queue
and when its waiters asked are a sorted set and a hash: deleting a counter could start it again
lower, a queue would lose its waiters' places. Told apart by what the key is, not by its name,
so a lock whose name ends like one of them (``{orders}:queue``) is still a lock."""


def _is_lock(kind: object, pttl: int) -> bool:
    return kind in (b"string", "string") and pttl >= 0


def _decode(name: bytes) -> str:
    return name.decode("utf-8", "surrogateescape")  # as the command line gives names: ``shown`` escapes


def _as_bytes(reply: bytes | str) -> bytes:
    """A key as bytes, also from a client made with ``decode_responses=True``."""
    return reply.encode("utf-8", "surrogateescape") if isinstance(reply, str) else reply


def held_locks(server: Any, prefix: str | bytes = DEFAULT_KEY_PREFIX, match: str | bytes = "*",
               limit: int | None = None) -> Iterator[HeldLock]:
    """The keys under ``prefix`` whose name (after it) matches the glob ``match``, with their
    remaining ttl, as SCAN finds them (a lock taken or freed meanwhile may or may not show); at
    most ``limit`` locks."""
    if limit is not None and (type(limit) is not int or not 0 <= limit <= sys.maxsize):
        raise (InvalidArgumentError if type(limit) is int else InvalidArgumentTypeError)(
            "limit", f"must be None or an int from 0 to {sys.maxsize}, not {limit!r}")
    return islice(_held_locks(server, prefix, match), limit)


def _held_locks(server: Any, prefix: str | bytes, match: str | bytes) -> Iterator[HeldLock]:
    pattern = _escape_glob(raw(prefix, "--prefix")) + raw(match, "--match")
    start = len(raw(prefix, "--prefix"))
    batch: list[bytes] = []
    for key in server.scan_iter(match=pattern, count=SCAN_COUNT):
        batch.append(_as_bytes(key))
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
        pipe.type(key)
    replies = pipe.execute()
    for key, pttl, kind in zip(keys, replies[0::2], replies[1::2], strict=True):
        if not _is_lock(kind, pttl):  # expired or released since the scan saw it, or no lock (NO_TTL)
            continue
        yield HeldLock(_decode(key[start:]), pttl / 1000.0)


def _escape_glob(text: bytes) -> bytes:
    """``text`` as a literal in a Redis glob (a prefix may hold ``*``, ``?``, ``[`` or ``\\``)."""
    return b"".join(b"\\" + bytes((byte,)) if byte in b"*?[]\\" else bytes((byte,)) for byte in text)


def lock_key(prefix: str | bytes, name: str | bytes) -> bytes:
    """The key of the lock ``name``, refused as the clients refuse it (empty, too long)."""
    return raw(prefix, "--prefix") + encode_name(raw(name, "name"))


def inspect(server: Any, name: str | bytes, prefix: str | bytes = DEFAULT_KEY_PREFIX) -> HeldLock | None:
    """The lock ``name`` if anyone holds it, else None (a key without a ttl, or one that is not a
    string, is no lock: ``NO_TTL``)."""
    key = lock_key(prefix, name)
    # One command at a time: redis-py's cluster pipeline retries a stopped master's timeout.
    pttl = server.pttl(key)
    # A string: GET cannot be refused. Never decoded: a token is random bytes, which a client
    # made with decode_responses=True would fail to decode.
    holder = None
    if _is_lock(server.type(key), pttl):
        holder = server.execute_command("GET", key, **{NEVER_DECODE: []})
    if holder is None:  # no lock (NO_TTL), or released meanwhile
        return None
    return HeldLock(name if isinstance(name, str) else _decode(name), pttl / 1000.0, holder)


def force_release(server: Any, name: str | bytes, prefix: str | bytes = DEFAULT_KEY_PREFIX,
                  holder: bytes | None = None) -> bool:
    """Delete the lock ``name`` whoever holds it, or only while ``holder`` (``inspect``'s) still
    does; whether it was deleted. Deleted as its holder's own release would (the release script:
    compared and deleted in one step, so a lock taken meanwhile by someone else stays, and its
    waiters are told); the holder is not: it finds the lock gone at its next renewal, extend or
    check. A key without a ttl, or one that is not a string, is never deleted (``NO_TTL``)."""
    if holder is not None and type(holder) is not bytes:
        raise InvalidArgumentTypeError("holder", f"must be None or bytes (a HeldLock's holder), not "
                                                 f"{type(holder).__name__}")
    if holder is None:
        held = inspect(server, name, prefix)
        if held is None:
            return False
        holder = held.holder
    release = server.register_script(RELEASE.source)  # EVALSHA, loaded if need be: what clients are allowed
    return released(release(keys=[lock_key(prefix, name)], args=[holder]))


def confirm_release(server: Any, name: str, prefix: str, yes: bool, ask: Callable[[str], str],
                    say: Callable[[str], None]) -> int:
    """The CLI's ``release --force``: the exit code (0 released, 1 nothing held or not confirmed)."""
    held = inspect(server, name, prefix)
    if held is None:
        say(f"{shown(name)}: not held")
        return 1
    if not yes:
        answer = ask(f"Release '{shown(name)}' ({held.left} left) by force? Its holder is not told and may "
                     "still be working under it. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            say("not released")
            return 1
    if not force_release(server, name, prefix, held.holder):  # that holder's: not one that came since
        say(f"{shown(name)}: gone before it could be released (its holder released it, or it expired)")
        return 1
    say(f"{shown(name)}: released")
    return 0

