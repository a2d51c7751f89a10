"""The operator helpers and the SQL fencing helper type their bad arguments as the rest of
turbolock does (InvalidArgumentTypeError for a wrong type, InvalidArgumentError for a wrong value,
each naming the argument), and the operator helpers take the bytes a client takes (found in
review: a bytes prefix or name raised AttributeError, a negative limit islice's bare ValueError,
a table of None or a column of bytes a ValueError about identifiers)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from turbolock import InvalidArgumentError, InvalidArgumentTypeError, LockClient, admin
from turbolock.fenced_sql import fenced_read_sql, fenced_write_sql


@pytest.mark.parametrize("make", [fenced_write_sql, fenced_read_sql])
@pytest.mark.parametrize(("arguments", "argument"), [
    ((None, "id", ["balance"]), "table"),
    (("accounts", 7, ["balance"]), "key_column"),
    (("accounts", "id", [b"balance"]), "columns"),
])
def test_fenced_sql_a_wrong_type_is_a_type_error(make: Any, arguments: tuple[Any, ...],
                                                 argument: str) -> None:
    with pytest.raises(InvalidArgumentTypeError) as raised:
        make(*arguments)
    assert raised.value.argument == argument


@pytest.mark.parametrize("core_name", ["c"], indirect=True)  # no core's own
def test_admin_takes_the_bytes_prefix_and_name_a_client_takes(client: LockClient, raw: redis.Redis,
                                                              key_prefix: str) -> None:
    assert client.try_acquire(b"job", 30) is not None
    found = admin.inspect(raw, b"job", key_prefix.encode())
    assert found is not None and found.name == "job" and 29 < found.remaining <= 30
    assert [held.name for held in admin.held_locks(raw, key_prefix.encode(), b"j*")] == ["job"]
    assert admin.force_release(raw, b"job", key_prefix.encode(), found.holder)
    assert admin.inspect(raw, "job", key_prefix) is None
    with pytest.raises(InvalidArgumentTypeError) as raised:
        admin.inspect(raw, 7, key_prefix)  # type: ignore[arg-type]
    assert raised.value.argument == "name"


@pytest.mark.parametrize(("limit", "error"), [(-1, InvalidArgumentError), (True, InvalidArgumentTypeError),
                                              (2.0, InvalidArgumentTypeError)])
def test_admin_a_bad_limit_is_refused_by_name(raw: redis.Redis, key_prefix: str, limit: Any,
                                              error: type[Exception]) -> None:
    with pytest.raises(error) as raised:
        admin.held_locks(raw, key_prefix, limit=limit)
    assert getattr(raised.value, "argument", None) == "limit"
