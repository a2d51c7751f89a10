"""The settings every single-server client shares, their defaults and their checks, and the
error a client raises when an acquire's reply was lost."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from turbolock._flows.renewal_book import AutoRenew, OnLost, check_policy
from turbolock._wire.replies import describe_names
from turbolock._wire.validate import check_flag
from turbolock.errors import (
    AcquireOutcomeUnknownError,
    ClientClosedError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    NotDurableError,
)

DEFAULT_KEY_PREFIX = "turbolock:"
DEFAULT_CHUNK_SIZE = 1000
MAX_CHUNK_SIZE = 10_000
CLIENT_KEYWORDS = ("key_prefix", "max_connections", "chunk_size", "core")
"""Keywords of a client's own, as opposed to the connection's (``from_url``, ``from_redis``)."""


class CodecAndChunks:
    """What every client says of its codec and its chunks."""

    core: ModuleType
    _chunk_size: int

    @property
    def implementation(self) -> str:
        """Which core this client encodes and parses with: "c" or "py"."""
        return str(self.core.IMPLEMENTATION)

    @property
    def chunk_size(self) -> int:
        """Commands per write in a bulk call."""
        return self._chunk_size


def check_chunk_size(chunk_size: object) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise InvalidArgumentTypeError("chunk_size", "must be an int")
    if not 1 <= chunk_size <= MAX_CHUNK_SIZE:
        raise InvalidArgumentError("chunk_size", f"must be from 1 to {MAX_CHUNK_SIZE}")
    return chunk_size


def check_max_connections(max_connections: object) -> int:
    if isinstance(max_connections, bool) or not isinstance(max_connections, int):
        kind = type(max_connections).__name__
        raise InvalidArgumentTypeError("max_connections", f"must be an int, not {kind}")
    if max_connections < 1:
        raise InvalidArgumentError("max_connections", "must be a positive int")
    return max_connections


def renew_policy(auto_renew: bool | AutoRenew, on_lost: OnLost | None, ms: int) -> AutoRenew | None:
    """The renewal terms of an acquire, or None when it is not renewed."""
    if auto_renew is False:
        if on_lost is not None:
            raise InvalidArgumentError("on_lost", "needs auto_renew (only renewed locks are watched)")
        return None
    if on_lost is not None and not callable(on_lost):
        raise InvalidArgumentTypeError("on_lost", "must be callable")
    return check_policy(auto_renew, ms)


def split_keywords(kwargs: dict[str, Any], own: tuple[str, ...] = CLIENT_KEYWORDS) -> dict[str, Any]:
    """Take the client's ``own`` keywords out of ``kwargs`` (the rest are the connection's)."""
    return {k: kwargs.pop(k) for k in own if k in kwargs}


def check_fenced(fenced: object, key_prefix: bytes, key: bytes, replicas_ack: int) -> bool:
    """Whether an acquire is fenced; a fenced one's checks (its counter must share the lock's
    cluster slot: see ``scripts.FENCED_ACQUIRE``)."""
    if not check_flag(fenced, "fenced"):
        return False
    _check_own_keys("fenced", key_prefix, key, replicas_ack, "fence counter")
    return True


def check_fair(fair: object, key_prefix: bytes, key: bytes, replicas_ack: int, token: bytes | None) -> bool:
    """Whether a Lock object is fair; a fair one's checks (its queue must share the lock's
    cluster slot: see ``fair_scripts``)."""
    if not check_flag(fair, "fair"):
        return False
    if token is not None:
        raise InvalidArgumentError("token", "a fair Lock draws its own tokens (they carry its place "
                                            "in the queue); leave token out")
    _check_own_keys("fair", key_prefix, key, replicas_ack, "queue")
    return True


def _check_own_keys(argument: str, key_prefix: bytes, key: bytes, replicas_ack: int, what: str) -> None:
    """A lock whose script keeps keys of its own beside the lock key (``scripts.SLOT_BASE``)."""
    _check_no_replicas_ack(argument, replicas_ack)
    _check_slot_rule(argument, key_prefix, key, what)


def _check_no_replicas_ack(argument: str, replicas_ack: int) -> None:
    if replicas_ack:
        raise InvalidArgumentError(argument, f"cannot be combined with replicas_ack yet (a {argument} "
                                             "acquire is not followed by WAIT)")


def _check_slot_rule(argument: str, key_prefix: bytes, key: bytes, what: str, names: str = "name") -> None:
    """Its own keys must share its cluster slot: no '}' outside a hash tag. The error names the
    client's key prefix when the '}' is there alone, else ``names`` (the call's argument)."""
    full = key_prefix + key
    start = full.find(b"{")
    tagged = start != -1 and full.find(b"}", start + 1) > start + 1
    if not tagged and b"}" in full:
        in_prefix = b"}" in key_prefix and b"}" not in key
        raise InvalidArgumentError("key_prefix" if in_prefix else names,
                                   f"a {argument} lock's {'key prefix' if in_prefix else 'name'} may not "
                                   f"hold '}}' outside a {{hash tag}}: its {what} would land in another "
                                   "cluster slot")


def check_fenced_keys(fenced: object, key_prefix: bytes, keys: Sequence[bytes], replicas_ack: int) -> bool:
    """``check_fenced`` for every key of a bulk call (checked by type even with no keys): whether
    it is fenced."""
    if not check_flag(fenced, "fenced"):
        return False
    if not keys:
        return True
    _check_no_replicas_ack("fenced", replicas_ack)
    # Only a '}' can break the name rule: keys without one pass as a whole (a bulk call's hot path).
    if b"}" in key_prefix or b"}" in b"".join(keys):
        for key in keys:
            _check_slot_rule("fenced", key_prefix, key, "fence counter", "names")
    return True


def not_durable_error(names: list[str | bytes], replicas: int) -> NotDurableError:
    return NotDurableError(
        f"{describe_names(names)} taken on the master but not acknowledged by {replicas} "
        f"replica{'s' if replicas > 1 else ''} in time; released again, since a failover could lose "
        f"{'it' if len(names) == 1 else 'them'}", names=names)


def acquire_lost_error(names: list[str | bytes], cause: Exception) -> AcquireOutcomeUnknownError:
    if not names:  # a bulk acquire whose unanswered locks were all never sent (see ``not_sent``)
        return AcquireOutcomeUnknownError(
            f"some locks of the acquire were never sent ({cause}); none of those was taken", names, False)
    if isinstance(cause, ClientClosedError):  # nothing left to release it with
        return AcquireOutcomeUnknownError(
            f"acquire of {describe_names(names)} was sent but the client was closed before its reply "
            "came; it may be held, and expires by its ttl", names, False)
    return AcquireOutcomeUnknownError(
        f"acquire of {describe_names(names)} was sent but no reply came ({cause}); it may be held, and is "
        "released with its token in the background as soon as the server answers", names, False)
