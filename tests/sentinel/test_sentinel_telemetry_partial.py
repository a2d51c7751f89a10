"""A bulk acquire that ends in AcquireOutcomeUnknownError (here: the master demoted mid-batch and
the resend failing) hands the caller the locks it did take (``error.acquired``), and telemetry
counts them as acquisitions. Found in review: only a call that returned was counted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from _blocking_async import FRONTS
from test_telemetry import Recorded, _instrumented
from turbolock import AcquireOutcomeUnknownError
from turbolock._flows.bulk_plan import AcquirePlan
from turbolock.redis_sentinel import RedisSentinel

from .test_sentinel_readonly_resend import NAMES, TTL, Demotion, _fronts, demotion, group  # noqa: F401


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    yield from _instrumented()


@pytest.mark.parametrize("front", FRONTS)
def test_locks_handed_over_in_the_error_are_counted(
        group: RedisSentinel, demotion: Demotion, core_name: str, key_prefix: str,  # noqa: F811
        front: str, recorded: Recorded, monkeypatch: pytest.MonkeyPatch) -> None:
    fronts = _fronts(front, group, core_name, key_prefix)
    try:
        client = fronts.make(chunk_size=1000)
        assert client.query("warm-up").held is False
        monkeypatch.setattr(AcquirePlan, "encode", demotion.encode(AcquirePlan.encode))
        with pytest.raises(AcquireOutcomeUnknownError) as caught:
            client.acquire_many(NAMES, TTL)
        monkeypatch.undo()
        taken = len(caught.value.acquired)
        assert taken > 0
        demotion.restore()
        assert recorded.total("turbolock.lock.acquisitions") == taken
        assert client.release_many(caught.value.acquired) == [True] * taken
    finally:
        fronts.close()
