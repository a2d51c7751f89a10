"""Fencing, the scenario itself: 8 processes increment one balance under one fenced lock; now and
then a holder is SIGSTOPped between its read and its write, past its ttl, while the others go on.
With the balance behind a ``FencedStore`` every increment applied is in the final balance (0 lost
updates over 200); the same run with plain reads and writes (the negative control) loses some,
so the test can tell."""

from __future__ import annotations

import pytest
import redis

from _pauses import Resumer
from turbolock.redis_server import RedisServer

from ._fencing_workers import TTL, account_writer
from ._harness import run_workers
from ._workers import data_key

pytestmark = pytest.mark.slow

WORKERS = 8
ROUNDS = 200
PAUSE = TTL * 2.5


def _run(url: str, core: str, prefix: str, raw: redis.Redis, fenced: bool) -> tuple[int, int, int, int]:
    with Resumer(raw, data_key(prefix, "paused"), PAUSE):
        reports = run_workers(account_writer, [(url, core, prefix, fenced, ROUNDS)] * WORKERS, timeout=90)
    applied = sum(report["applied"] for report in reports)
    balance = int(raw.hget(data_key(prefix, "account"), "value") or 0)
    return applied, balance, sum(report["refused"] for report in reports), sum(r["paused"] for r in reports)


def test_a_fenced_resource_refuses_every_late_write(redis_server: RedisServer, core_name: str,
                                                    key_prefix: str, raw: redis.Redis) -> None:
    applied, balance, refused, paused = _run(redis_server.url, core_name, key_prefix, raw, fenced=True)
    assert applied >= ROUNDS and paused >= 10, (applied, paused)
    assert balance == applied, f"{applied - balance} lost updates with fencing"
    assert refused >= 1, "no late write was refused: the pauses never let a successor in"


@pytest.mark.parametrize("core_name", ["py"], indirect=True)  # the scenario's control: one core is enough
def test_negative_control_without_fencing_late_writes_lose_updates(redis_server: RedisServer, core_name: str,
                                                                   key_prefix: str, raw: redis.Redis) -> None:
    applied, balance, _, paused = _run(redis_server.url, core_name, key_prefix, raw, fenced=False)
    assert applied >= ROUNDS and paused >= 10, (applied, paused)
    assert balance < applied, "no update was lost without fencing: the scenario does not test anything"
