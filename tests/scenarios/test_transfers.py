"""Transfers: 8 processes move money among 10 accounts under per-account locks."""

from __future__ import annotations

import pytest
import redis

from turbolock.redis_server import RedisServer

from ._harness import CTX, run_workers
from ._workers import data_key, transfer_worker

pytestmark = pytest.mark.slow

ACCOUNTS = 10
INITIAL = 1000
WORKERS = 8
TRANSFERS = 1000


def test_transfers_keep_money_and_logs_consistent(redis_server: RedisServer, core_name: str,
                                                  key_prefix: str, raw: redis.Redis) -> None:
    for account in range(ACCOUNTS):
        raw.set(data_key(key_prefix, "balance", account), INITIAL)
    start = CTX.Barrier(WORKERS)
    per_worker = TRANSFERS // WORKERS
    assert per_worker * WORKERS == TRANSFERS

    url = redis_server.url
    reports = run_workers(transfer_worker, [
        (url, core_name, key_prefix, per_worker, ACCOUNTS, 1000 + i, start) for i in range(WORKERS)
    ])

    assert sum(r["done"] + r["skipped"] for r in reports) == TRANSFERS
    done = sum(r["done"] for r in reports)
    assert done > TRANSFERS // 2, "most transfers should have had the funds"
    balances = [int(raw.get(data_key(key_prefix, "balance", a))) for a in range(ACCOUNTS)]
    assert sum(balances) == ACCOUNTS * INITIAL, f"money appeared or vanished: {balances}"
    assert min(balances) >= 0, f"an account went negative: {balances}"
    logged = 0
    for account, balance in enumerate(balances):
        log = [int(entry) for entry in raw.lrange(data_key(key_prefix, "log", account), 0, -1)]
        logged += len(log)
        assert INITIAL + sum(log) == balance, f"account {account}: a lost update (log says " \
            f"{INITIAL + sum(log)}, balance is {balance})"
    assert logged == 2 * done
    assert not raw.keys(key_prefix + "account:*"), "account locks were left behind"
