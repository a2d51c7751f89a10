"""A URL whose password holds an unencoded '/' (the README's own example of what to
percent-encode), or a number option spelled wrong in a URL with credentials, is refused with a
message that quotes nothing, and nothing in the exception's chain does either: the refusal was
raised inside ``except ValueError`` (``from None``), which kept urllib's error as ``__context__``,
"Port could not be cast to integer value as '<the password, up to its '/'>'", for any error
reporter that walks the chain. Found in review."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from turbolock import InvalidArgumentError, LockClient, RedlockClient
from turbolock.asyncio import AsyncLockClient

SECRET = "Zq9Secret"
URL = f"redis://locker:{SECRET}/x@127.0.0.1:6379/0"  # '/' not percent-encoded
NUMBER = f"redis://locker:pw@127.0.0.1:6379/0?socket_timeout={SECRET}"


def _chain(exc: BaseException | None) -> list[str]:
    texts: list[str] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts += [str(exc), repr(exc)]
        exc = exc.__cause__ or exc.__context__
    return texts


@pytest.mark.parametrize("make", [
    lambda: LockClient.from_url(URL),
    lambda: AsyncLockClient.from_url(URL),
    lambda: RedlockClient([URL, "redis://127.0.0.1:2", "redis://127.0.0.1:3"]),
    lambda: LockClient.from_url(NUMBER),
], ids=["LockClient", "AsyncLockClient", "RedlockClient", "number-option"])
def test_no_part_of_the_password_in_the_exception_chain(make: Callable[[], object]) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        make()
    assert SECRET not in str(raised.value)  # the message itself is clean
    leaked = [text for text in _chain(raised.value) if SECRET in text]
    assert not leaked, leaked
