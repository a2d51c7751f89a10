"""A Redlock renewal round that finds many locks gone from a majority marks every one lost before
the first ``on_lost`` runs, and logs them in one line (see tests/test_renewal_finds_many_gone.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from _eventually import eventually
from _lost_locks import MarkedBeforeSignal
from _raw import Raws
from turbolock import RedlockClient
from turbolock.redis_server import RedisServer

COUNT = 50


def test_redlock(three: list[RedisServer], make_redlock: Callable[..., RedlockClient], raws: Raws,
                 key_prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    client = make_redlock(three)
    on_lost = MarkedBeforeSignal()
    names = [f"gone:{i}" for i in range(COUNT)]
    with caplog.at_level(logging.WARNING, logger="turbolock.renewal"):
        result = client.acquire_many(names, 0.6, auto_renew=True, on_lost=on_lost)
        leases = on_lost.leases = result.acquired
        assert len(leases) == COUNT
        for master in raws(three)[:2]:  # gone from a majority
            master.delete(*[key_prefix + name for name in names])
        for lease in leases:
            assert lease.lost.wait(2)
        assert eventually(lambda: len(on_lost.seen) == COUNT, 2)  # the signals come after the marks
    assert on_lost.seen[0] == COUNT
    lines = [record.getMessage() for record in caplog.records if "lost" in record.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(
        f"turbolock: {COUNT} locks lost, lock 'gone:0' among them: its renewal found it no longer held on "
        "a majority")
