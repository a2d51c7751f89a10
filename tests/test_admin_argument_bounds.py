"""``turbolock.admin``'s last unchecked arguments, refused by name before anything is sent:
``held_locks(limit=2**63)`` (past ``sys.maxsize``: islice's bare ValueError) and a
``force_release`` holder that is not bytes (the ``HeldLock`` itself, a list: redis-py's
DataError naming nothing; an int was sent as a token). Found in review."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from turbolock import InvalidArgumentError, InvalidArgumentTypeError, admin


def test_a_limit_past_sys_maxsize_is_refused_by_name(raw: redis.Redis, key_prefix: str) -> None:
    with pytest.raises((InvalidArgumentError, InvalidArgumentTypeError)) as raised:
        list(admin.held_locks(raw, key_prefix, limit=2**63))
    assert getattr(raised.value, "argument", None) == "limit", repr(raised.value)


@pytest.mark.parametrize("holder", ["HeldLock", [], 7], ids=["the-HeldLock-itself", "list", "int"])
def test_force_release_checks_its_holder(raw: redis.Redis, key_prefix: str, holder: Any) -> None:
    raw.set(key_prefix + "job", b"0123456789abcdef", px=30_000)
    held = admin.inspect(raw, "job", key_prefix)
    assert held is not None
    given = held if holder == "HeldLock" else holder
    with pytest.raises((InvalidArgumentError, InvalidArgumentTypeError)) as raised:
        admin.force_release(raw, "job", key_prefix, holder=given)
    assert getattr(raised.value, "argument", None) == "holder", repr(raised.value)
    assert raw.get(key_prefix + "job") == b"0123456789abcdef"
