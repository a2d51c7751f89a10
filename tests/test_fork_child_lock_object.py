"""A Lock object held in the parent, seen from a forked child: ``owned()`` is False and
``remaining()`` 0.0 there (the parent holds it, the child's Lock does not), in the parent it is
still owned. They raised InvalidArgumentError ("acquired in another process"). Found in review."""

from __future__ import annotations

import pytest

from _forking import in_forked_child
from turbolock import LockClient

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # no core in this


def test_a_forked_child_does_not_own_its_parents_lock(client: LockClient) -> None:
    lock = client.lock("job", 10)
    assert lock.acquire()

    def child() -> str:
        return f"owned={lock.owned()} remaining={lock.remaining()} locked={lock.locked()}"

    assert in_forked_child(child) == "owned=False remaining=0.0 locked=True"
    assert lock.owned() and 9 < lock.remaining() <= 10  # the parent's, untouched
    lock.release()
