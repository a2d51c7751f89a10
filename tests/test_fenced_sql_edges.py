"""Edges of the SQL statements (``fenced_write_sql``, ``fenced_read_sql``) found in review, on
SQLite and a real PostgreSQL:

- a case variant of the key or fence column ("ID" for id) is refused like the column itself:
  SQLite ignores case even in quoted names, and the statement rewrote the row's key there;
- a row whose fence column is NULL (the column added to rows already there) takes a fenced read
  and write as a row never fenced (fence 0), as ``FencedStore`` does; it refused every one, for
  ever, which reads as "a newer holder has been there";
- a misspelled column is an error on SQLite, not its own name read back as a string (SQLite
  takes an unknown double-quoted name standing alone for a string literal);
- a stale fence given as text (it crossed a process boundary as a string: a queue message, an
  HTTP header) is refused on SQLite, as the hand-written recipe refuses it: the statement
  compared ``COALESCE(last_fence, 0)``, which drops the column's INTEGER affinity, so the text
  compared as a string, above every number, and the stale write went through."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
import pytest

from _postgres import Postgres
from turbolock import InvalidArgumentError
from turbolock.fenced_sql import fenced_read_sql, fenced_write_sql


@pytest.mark.parametrize("call", [
    lambda: fenced_write_sql("accounts", "id", ["balance", "ID"]),
    lambda: fenced_read_sql("accounts", "id", ["Last_Fence"]),
    lambda: fenced_write_sql("accounts", "id", ["balance", "BALANCE"]),
    lambda: fenced_write_sql("accounts", "id", ["balance"], fence_column="ID"),
], ids=["key-in-columns", "fence-in-columns", "column-twice", "fence-is-key"])
def test_a_case_variant_of_a_column_the_statement_sets_is_refused(call: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        call()


def _sqlite_never_fenced() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL)")
    db.execute("INSERT INTO accounts (id, balance) VALUES ('a', 100)")
    db.execute("ALTER TABLE accounts ADD COLUMN last_fence INTEGER")  # the row's is NULL
    return db


def test_a_row_never_fenced_takes_fenced_statements_sqlite() -> None:
    db = _sqlite_never_fenced()
    assert db.execute(fenced_read_sql("accounts", "id", ["balance"]), {"key": "a", "fence": 7}).fetchall() \
        == [(100,)]
    write = fenced_write_sql("accounts", "id", ["balance"])
    assert db.execute(write, {"key": "a", "fence": 5, "balance": 1}).rowcount == 0  # older than the read's
    assert db.execute(write, {"key": "a", "fence": 7, "balance": 90}).rowcount == 1
    assert db.execute("SELECT balance, last_fence FROM accounts").fetchall() == [(90, 7)]


def test_a_row_never_fenced_takes_fenced_statements_postgres(postgres: Postgres) -> None:
    with psycopg.connect(postgres.dsn, autocommit=True) as pg:
        pg.execute("DROP TABLE IF EXISTS never_fenced")
        pg.execute("CREATE TABLE never_fenced (id TEXT PRIMARY KEY, balance INTEGER NOT NULL)")
        pg.execute("INSERT INTO never_fenced (id, balance) VALUES ('a', 100)")
        pg.execute("ALTER TABLE never_fenced ADD COLUMN last_fence BIGINT")
        read = fenced_read_sql("never_fenced", "id", ["balance"], paramstyle="pyformat")
        write = fenced_write_sql("never_fenced", "id", ["balance"], paramstyle="pyformat")
        assert pg.execute(read, {"key": "a", "fence": 7}).fetchall() == [(100,)]
        assert pg.execute(write, {"key": "a", "fence": 5, "balance": 1}).rowcount == 0
        assert pg.execute(write, {"key": "a", "fence": 7, "balance": 90}).rowcount == 1
        assert pg.execute("SELECT balance, last_fence FROM never_fenced").fetchall() == [(90, 7)]


@pytest.mark.parametrize("statement", [
    lambda: fenced_read_sql("accounts", "id", ["balanse"]),
    lambda: fenced_read_sql("accounts", "ident", ["balance"]),
    lambda: fenced_write_sql("accounts", "ident", ["balance"]),
    lambda: fenced_write_sql("accounts", "id", ["balance"], fence_column="last_fenc"),
], ids=["read-column", "read-key", "write-key", "write-fence"])
def test_a_misspelled_column_is_an_error_on_sqlite(statement: Any) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER, last_fence INTEGER)")
    db.execute("INSERT INTO accounts VALUES ('a', 100, 0)")
    with pytest.raises(sqlite3.OperationalError, match="no such column"):
        db.execute(statement(), {"key": "a", "fence": 1, "balance": 2})


NEWER = 1_800_000_000_000_500  # what a newer holder already wrote with
STALE = "1800000000000001"  # an older holder's fence, as text


def _sqlite_fenced() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, last_fence BIGINT)")
    db.execute("INSERT INTO accounts VALUES (42, 100, ?)", (NEWER,))
    return db


@pytest.mark.parametrize("statement", ["recipe", "write", "read"])
def test_a_stale_fence_given_as_text_is_refused_on_sqlite(statement: str) -> None:
    db = _sqlite_fenced()
    if statement == "recipe":  # the README's hand-written statement: the helper's must agree with it
        sql = ("UPDATE accounts SET balance = :balance, last_fence = :fence "
               "WHERE id = :key AND last_fence <= :fence")
    elif statement == "write":
        sql = fenced_write_sql("accounts", "id", ["balance"])
    else:
        sql = fenced_read_sql("accounts", "id", ["balance"])
    params: dict[str, object] = {"key": 42, "fence": STALE}
    if statement != "read":
        params["balance"] = 1
    cursor = db.execute(sql, params)
    rows = cursor.fetchall()
    assert cursor.rowcount in (0, -1) and rows == [], f"{statement}: the stale fence went through"
    assert db.execute("SELECT balance, last_fence FROM accounts").fetchall() == [(100, NEWER)]
    fresh = db.execute(sql, {**params, "fence": str(NEWER + 1)})
    fresh.fetchall()
    assert db.execute("SELECT last_fence FROM accounts").fetchone() == (NEWER + 1,), "a fresh one was refused"
