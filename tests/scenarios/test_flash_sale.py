"""Flash sale: 8 processes sell 100 items from one stock key under one lock."""

from __future__ import annotations

import pytest
import redis

from turbolock.redis_server import RedisServer

from ._harness import CTX, run_workers
from ._workers import data_key, flash_sale_buyer

pytestmark = pytest.mark.slow

STOCK = 100
BUYERS = 8


def test_flash_sale_sells_exactly_the_stock(redis_server: RedisServer, core_name: str, key_prefix: str,
                                            raw: redis.Redis) -> None:
    raw.set(data_key(key_prefix, "stock"), STOCK)
    start = CTX.Barrier(BUYERS)

    reports = run_workers(flash_sale_buyer,
                          [(redis_server.url, core_name, key_prefix, start)] * BUYERS)

    assert {report["implementation"] for report in reports} == {core_name}
    sold = [report["sold"] for report in reports]
    assert sum(sold) == STOCK, f"sold {sum(sold)} of {STOCK} (per worker: {sold})"
    assert int(raw.get(data_key(key_prefix, "stock"))) == 0
    assert raw.llen(data_key(key_prefix, "sales")) == STOCK
    assert all(report["lowest_seen"] >= 0 for report in reports), "stock went negative"
    assert all(report["lowest_seen"] == 0 for report in reports), "every buyer saw the sold-out stock"
    assert sum(report["lost_releases"] for report in reports) == 0, "a lock expired inside the sale"
    assert not raw.exists(key_prefix + "sale:item-1"), "the sale lock was left behind"
