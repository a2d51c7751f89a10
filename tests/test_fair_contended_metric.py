"""A fair Lock's attempts that find the lock held (a place in its queue) count as contended
(`turbolock.lock.contended`), as a plain Lock's do (found by review: they were not counted)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from test_telemetry import Recorded, recorded  # noqa: F401  (fixture)


def test_a_fair_lock_that_waits_is_counted_contended(make_client: Callable[..., Any],
                                                     recorded: Recorded) -> None:  # noqa: F811
    """``turbolock.lock.contended``: acquire attempts that found the lock held. A fair Lock's
    attempts that found it held (and queued) are such attempts, as a plain Lock's are."""
    client = make_client()
    seen = []
    for fair, name in ((False, "{plain}"), (True, "{fair}")):
        holder = client.try_acquire(name, 30)
        assert holder is not None
        timer = threading.Timer(0.4, client.release, (holder,))
        timer.start()
        try:
            lock = client.lock(name, 30, timeout=5, fair=fair)
            assert lock.acquire()
            lock.release()
        finally:
            timer.join()
        seen.append(recorded.total("turbolock.lock.contended") - sum(seen))
    assert seen[0] >= 1 and seen[1] >= 1, seen
    # plain: at least one contended attempt was counted; fair: the same wait
    plain_and_fair = recorded.total("turbolock.lock.contended")
    assert recorded.total("turbolock.lock.acquisitions") == 4
    assert plain_and_fair >= 2, plain_and_fair
