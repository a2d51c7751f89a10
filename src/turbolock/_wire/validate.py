"""Argument checks done before anything is sent to Redis.

Every check raises ``InvalidArgumentError`` (a ValueError) or ``InvalidArgumentTypeError``
(a TypeError) naming the argument; none of them ever quotes a token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from turbolock._wire import core_py as _core_py
from turbolock.errors import InvalidArgumentError, InvalidArgumentTypeError

MAX_NAME_BYTES = 1024
"""Longest lock name, in bytes after UTF-8 encoding and before the key prefix."""

MIN_TOKEN_BYTES = 16
TOKEN_BYTES = 16
"""Bytes in a token turbolock draws itself (128 random bits)."""
MAX_TOKEN_BYTES = 1024

MIN_TTL_MS = 1
MAX_TTL_MS = 30 * 24 * 3600 * 1000
"""Longest ttl: 30 days. Longer holds should renew (auto-renewal) instead."""

# Float seconds rarely land exactly on a millisecond (0.003 * 1000 == 3.0000000000000004);
# anything within this many milliseconds of a whole number counts as whole.
_MS_TOLERANCE = 1e-6

Seconds = int | float | timedelta


def encode_name(name: object, argument: str = "name") -> bytes:
    """The lock name as bytes: str is UTF-8 encoded, bytes are taken as they are."""
    if type(name) is bytes:
        encoded = name
    elif isinstance(name, str):
        try:
            encoded = name.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(argument, f"cannot be encoded as UTF-8 ({exc.reason})") from None
    elif isinstance(name, bytes):
        encoded = bytes(name)
    else:
        raise InvalidArgumentTypeError(argument, f"must be str or bytes, not {type(name).__name__}")
    if not encoded:
        raise InvalidArgumentError(argument, "must not be empty")
    if len(encoded) > MAX_NAME_BYTES:
        raise InvalidArgumentError(argument, f"is {len(encoded)} bytes long; the limit is {MAX_NAME_BYTES}")
    return encoded


def encode_names(names: Sequence[object], argument: str = "names",
                 core: Any = None) -> tuple[list[bytes], bool]:
    """``encode_name`` for a whole list, and whether the names were all exactly str or all
    exactly bytes (then distinct names are distinct keys).

    In one pass of ``core`` (the client's; the pure core when None) when every name is fine,
    else name by name, so that the first bad name raises as ``encode_name`` would, before
    anything is sent.
    """
    keys = (_core_py if core is None else core).names_as_keys(names, MAX_NAME_BYTES)
    if keys is not None:
        return keys, True
    return [encode_name(name, argument) for name in names], False


def check_flag(value: object, argument: str) -> bool:
    """A True/False argument; anything else (a truthy string, 0 or 1) is refused by type."""
    if not isinstance(value, bool):
        raise InvalidArgumentTypeError(argument, "must be True or False")
    return value


def _seconds(value: object, argument: str) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentTypeError(
            argument, f"must be seconds as int or float, or a timedelta, not {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:  # an int past float's range: longer than any wait, ttl or timeout allows
        return math.inf if value > 0 else -math.inf


def ttl_ms(ttl: object, argument: str = "ttl") -> int:
    """A ttl in seconds (int, float or timedelta) as whole milliseconds, within the limits."""
    if ttl is None:
        raise InvalidArgumentTypeError(argument, "is required (seconds as int or float, or a timedelta)")
    if isinstance(ttl, timedelta):
        micros = (ttl.days * 86400 + ttl.seconds) * 1_000_000 + ttl.microseconds
        if micros % 1000:
            raise InvalidArgumentError(argument, "must be a whole number of milliseconds")
        ms = micros // 1000
    elif isinstance(ttl, int) and not isinstance(ttl, bool):
        ms = ttl * 1000
    else:
        seconds = _seconds(ttl, argument)
        if math.isnan(seconds) or math.isinf(seconds):
            raise InvalidArgumentError(argument, f"must be a finite number of seconds, not {seconds}")
        exact = seconds * 1000.0
        if math.isinf(exact):  # finite seconds whose milliseconds are not
            raise InvalidArgumentError(argument, f"must be at most {MAX_TTL_MS // 1000} seconds (30 days)")
        ms = round(exact)
        if abs(exact - ms) > _MS_TOLERANCE:
            raise InvalidArgumentError(argument, "must be a whole number of milliseconds")
    if ms < MIN_TTL_MS:
        raise InvalidArgumentError(argument, "must be positive (at least 1 millisecond)")
    if ms > MAX_TTL_MS:
        raise InvalidArgumentError(argument, f"must be at most {MAX_TTL_MS // 1000} seconds (30 days)")
    return ms


def timeout_seconds(timeout: object, argument: str = "timeout") -> float | None:
    """A wait limit in seconds: None (or infinity) waits forever, 0 is a single try."""
    if timeout is None:
        return None
    seconds = _seconds(timeout, argument)
    if math.isnan(seconds):
        raise InvalidArgumentError(argument, "must be a number of seconds, not NaN")
    if seconds < 0:
        raise InvalidArgumentError(argument, "must not be negative")
    if math.isinf(seconds):
        return None
    return seconds


MAX_TIMEOUT_SECONDS = 365 * 24 * 3600
"""The longest connect or call timeout (a year): the platform's socket and thread waits refuse
ones not much longer (``OverflowError`` past about 1e9 s), so a call would fail, not wait."""


def positive_seconds(value: object, argument: str) -> float:
    """A finite, positive duration (connect and call timeouts), at most a year."""
    seconds = _seconds(value, argument)
    if math.isnan(seconds) or math.isinf(seconds) or seconds <= 0:
        raise InvalidArgumentError(argument, "must be a finite, positive number of seconds")
    if seconds > MAX_TIMEOUT_SECONDS:
        raise InvalidArgumentError(argument, f"must be at most {MAX_TIMEOUT_SECONDS} seconds (a year)")
    return seconds


def check_token(token: object, argument: str = "token") -> bytes:
    """A caller-supplied token: bytes, 16 to 1024 long (never quoted back)."""
    if type(token) is not bytes:
        raise InvalidArgumentTypeError(argument, f"must be bytes, not {type(token).__name__}")
    if len(token) < MIN_TOKEN_BYTES:
        raise InvalidArgumentError(argument, f"must be at least {MIN_TOKEN_BYTES} bytes (random) long")
    if len(token) > MAX_TOKEN_BYTES:
        raise InvalidArgumentError(argument, f"must be at most {MAX_TOKEN_BYTES} bytes long")
    return token


def check_key_prefix(prefix: object) -> bytes:
    if isinstance(prefix, str):
        try:
            prefix = prefix.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentError("key_prefix", "cannot be encoded as UTF-8 (pass bytes)") from None
    if type(prefix) is not bytes:
        raise InvalidArgumentTypeError("key_prefix", f"must be str or bytes, not {type(prefix).__name__}")
    if len(prefix) > MAX_NAME_BYTES:
        raise InvalidArgumentError("key_prefix", f"must be at most {MAX_NAME_BYTES} bytes long")
    return prefix
