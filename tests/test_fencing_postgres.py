"""The SQL half of fencing against a real PostgreSQL: fences from turbolock's fenced leases,
the recipe's statements (``fenced_write_sql``, ``fenced_read_sql``) run through psycopg, and a
paused holder's late write refused while its successor's goes through."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from _postgres import Postgres
from turbolock.client import LockClient
from turbolock.fenced_sql import fenced_read_sql, fenced_write_sql


@pytest.fixture
def db(postgres: Postgres) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres.dsn, autocommit=True) as connection:
        connection.execute("DROP TABLE IF EXISTS accounts")
        connection.execute("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL, "
                           "last_fence BIGINT NOT NULL DEFAULT 0)")
        connection.execute("INSERT INTO accounts (id, balance) VALUES ('a', 100)")
        yield connection


def test_a_paused_holders_late_write_is_refused(db: psycopg.Connection[Any], client: LockClient) -> None:
    connection = db
    read = fenced_read_sql("accounts", "id", ["balance"], paramstyle="pyformat")
    write = fenced_write_sql("accounts", "id", ["balance"], paramstyle="pyformat")
    first = client.try_acquire("account:a", 0.2, fenced=True)
    assert first is not None
    assert connection.execute(read, {"key": "a", "fence": first.fence}).fetchall() == [(100,)]
    time.sleep(0.3)  # the holder pauses past its ttl
    second = client.try_acquire("account:a", 10, fenced=True)
    assert second is not None and second.fence > first.fence
    rows = connection.execute(read, {"key": "a", "fence": second.fence}).fetchall()
    assert rows == [(100,)]
    assert connection.execute(write, {"key": "a", "fence": second.fence, "balance": 150}).rowcount == 1
    late = connection.execute(write, {"key": "a", "fence": first.fence, "balance": 101})
    assert late.rowcount == 0  # the paused holder wakes up and writes: refused
    assert connection.execute(read, {"key": "a", "fence": first.fence}).fetchall() == []
    stored = connection.execute("SELECT balance, last_fence FROM accounts").fetchall()
    assert stored == [(150, second.fence)]
    assert client.release(second)


def test_control_an_unfenced_update_lets_the_late_write_through(db: psycopg.Connection[Any]) -> None:
    # The negative control: the same late write without the fence condition overwrites the
    # successor's balance, the lost update fencing exists to stop.
    connection = db
    connection.execute("UPDATE accounts SET balance = 150 WHERE id = 'a'")
    late = connection.execute("UPDATE accounts SET balance = %(balance)s WHERE id = %(key)s",
                              {"key": "a", "balance": 101})
    assert late.rowcount == 1
    assert connection.execute("SELECT balance FROM accounts").fetchall() == [(101,)]
