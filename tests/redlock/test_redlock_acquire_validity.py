"""Untested before review: the Redlock acquire's validity check (``valid = started + (ms -
drift) / 1000 > now`` in ``RedlockFlows._attempted``) replaced by ``valid = True``, or without
the drift allowance. No test lets an attempt's validity run out between its SET NX and the
verdict (the per-node timeout alone never does: ``_ttl`` keeps it below the validity), so an
attempt that won a majority too late would be returned as held. Here the calling thread is held
up after every master answered (what a descheduled or stopped process does)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from redlock._helpers import values, wait_for
from turbolock import RedlockClient, RedlockStatus
from turbolock.redis_server import RedisServer

TTL = 0.5  # 500 ms: validity 493 ms minus the attempt's time (drift 0.01 * 500 + 2 ms)


def _held_up_after_the_replies(client: RedlockClient, seconds: float) -> None:
    real = client._fan_one

    def fan_one(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        time.sleep(seconds)
        return out

    client._fan_one = fan_one  # type: ignore[method-assign]


@pytest.mark.parametrize("late_ms, drift_factor, acquired",
                         [(600, 0.01, False), (700, 0.4, False), (100, 0.01, True)],
                         ids=["validity-gone", "drift-ate-the-rest", "control-validity-left"])
def test_an_attempt_whose_validity_ran_out_before_its_verdict_is_not_acquired(
        three: list[RedisServer], make_redlock: Callable[..., RedlockClient], raws: Callable[..., list],
        key_prefix: str, late_ms: int, drift_factor: float, acquired: bool) -> None:
    # drift-ate-the-rest: a 1 s ttl with a 0.4 drift factor leaves 598 ms less the attempt's
    # time; 700 ms late is within the ttl but past the validity
    ttl = TTL if drift_factor < 0.1 else 1.0
    client = make_redlock(three, drift_factor=drift_factor)
    _held_up_after_the_replies(client, late_ms / 1000.0)
    result = client.acquire("late", ttl, blocking=False)
    lease = result.lease
    if acquired:
        assert result.status is RedlockStatus.ACQUIRED and lease is not None
        assert lease.valid_for() > 0
        assert client.release(lease)
        return
    assert lease is None, f"an attempt past its validity was returned as held ({result.status})"
    assert result.status is RedlockStatus.EXPIRED
    # what it took on every master is given back
    assert wait_for(lambda: values(raws(three), key_prefix + "late") == [None] * 3, 2.0)


@pytest.mark.parametrize("late_ms, extended", [(600, False), (100, True)], ids=["validity-gone", "control"])
def test_an_extend_answered_after_its_validity_is_not_extended(
        three: list[RedisServer], make_redlock: Callable[..., RedlockClient], key_prefix: str,
        late_ms: int, extended: bool) -> None:
    """Untested before review: the Redlock extend's validity check (``_extend_one_flow``:
    ``verdict == EXTENDED and started + (ms - drift) / 1000 > now``) dropped."""
    client = make_redlock(three)
    lease = client.try_acquire("late-extend", 5.0)
    assert lease is not None
    _held_up_after_the_replies(client, late_ms / 1000.0)
    assert client.extend(lease, TTL) is extended
