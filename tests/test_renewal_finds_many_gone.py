"""A renewal round that finds many locks gone at once (deleted, or taken over) marks every one of
them lost before the first ``on_lost`` runs, and logs them in one line, as the README's "Logs"
and "Auto-renewal" promise: it marked, logged and signalled them one at a time (a slow
``on_lost`` left the others believed held, 50 warnings for 50 locks). Found in review. The
expired-before-renewal path (``tests/test_mass_loss_signalled_in_time.py``) did it already."""

from __future__ import annotations

import logging

import pytest
import redis

from _eventually import eventually
from _lost_locks import MarkedBeforeSignal
from turbolock import LockClient

COUNT = 50


def test_one_server(client: LockClient, raw: redis.Redis, key_prefix: str,
                    caplog: pytest.LogCaptureFixture) -> None:
    on_lost = MarkedBeforeSignal()
    names = [f"gone:{i}" for i in range(COUNT)]
    with caplog.at_level(logging.WARNING, logger="turbolock.renewal"):
        result = client.acquire_many(names, 0.6, auto_renew=True, on_lost=on_lost)
        leases = on_lost.leases = result.acquired
        assert len(leases) == COUNT
        raw.delete(*[key_prefix + name for name in names])  # all gone before their first renewal
        for lease in leases:
            assert lease.lost.wait(2)
        assert eventually(lambda: len(on_lost.seen) == COUNT, 2)  # the signals come after the marks
    # Every lease marked before the first on_lost ran.
    assert on_lost.seen[0] == COUNT
    lines = [record.getMessage() for record in caplog.records if "lost" in record.getMessage()]
    assert lines == [f"turbolock: {COUNT} locks lost, lock 'gone:0' among them: its key was gone or held "
                     "by another token at renewal"]
