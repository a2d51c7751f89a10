"""``db`` and ``replicas_ack`` past what a server takes (a C int) are refused by name when the
client is made. They had no upper bound: ``replicas_ack=10**5000`` raised a bare ValueError from
the constructor, ``db=10**5000`` one from every call's handshake, and ``db=2**31`` was refused by
the server on every call. Found in review."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from turbolock import InvalidArgumentError, InvalidArgumentTypeError
from turbolock.options import options_from_keywords


@pytest.mark.parametrize(("option", "value"), [("replicas_ack", 10**5000), ("db", 10**5000), ("db", 2**31),
                                               ("replicas_ack", 2**31)],
                         ids=["replicas_ack-5000-digits", "db-5000-digits", "db-2**31", "replicas_ack-2**31"])
def test_a_huge_int_option_is_refused_by_name_at_construction(make_client: Callable[..., Any], option: str,
                                                              value: int) -> None:
    with pytest.raises((InvalidArgumentError, InvalidArgumentTypeError)) as raised:
        client = make_client(**{option: value})
        client.try_acquire("x", 5)  # (not reached when the constructor refuses it)
    assert getattr(raised.value, "argument", None) == option, repr(raised.value)


def test_the_largest_db_is_taken() -> None:
    assert options_from_keywords(db=2**31 - 1).db == 2**31 - 1
    with pytest.raises(InvalidArgumentError) as raised:
        options_from_keywords(db=2**31)
    assert raised.value.argument == "db"

