"""The SQL recipe's statements (``turbolock.fenced_sql``) refuse column lists that would write the
wrong thing, and quote identifiers so a reserved word reads the same column on SQLite and on a
real PostgreSQL (a throwaway cluster, ``_postgres``). Found in review: a string of columns was
taken letter by letter, a column named ``fence`` or ``key`` shared that parameter, overlapping
columns went through, and ``RETURNING user`` read PostgreSQL's session user."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from _postgres import Postgres
from turbolock import InvalidArgumentError, InvalidArgumentTypeError
from turbolock.fenced_sql import fenced_read_sql, fenced_write_sql


@pytest.fixture
def pg(postgres: Postgres) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres.dsn, autocommit=True) as connection:
        yield connection


@pytest.mark.parametrize("make", [fenced_write_sql, fenced_read_sql])
def test_columns_given_as_one_string_are_refused(make: Any) -> None:
    # "balance" was iterated letter by letter: SET b = :b, a = :a, l = :l, ... (or RETURNING b, a, ...)
    with pytest.raises(InvalidArgumentTypeError) as raised:
        make("accounts", "id", "balance")
    assert raised.value.argument == "columns"


@pytest.mark.parametrize("column", ["fence", "key"])
def test_a_column_named_like_a_statement_parameter_is_refused(column: str) -> None:
    # The value parameters are named after the columns, beside ``key`` and ``fence``: a column
    # named so would be written the fence number, or the row's key, not its value.
    for make in (fenced_write_sql, fenced_read_sql):
        with pytest.raises(InvalidArgumentError) as raised:
            make("t", "id", [column])
        assert raised.value.argument == "columns"


@pytest.mark.parametrize(("key_column", "columns", "fence_column"), [
    ("id", ["balance", "last_fence"], "last_fence"),  # the fence column among the written ones
    ("id", ["balance", "id"], "last_fence"),  # the key rewritten by a fenced write
    ("id", ["balance", "balance"], "last_fence"),  # one column twice
    ("id", ["balance"], "id"),  # the key column as the fence column
])
def test_overlapping_columns_are_refused(key_column: str, columns: list[str], fence_column: str) -> None:
    # Each statement makes PostgreSQL fail ("multiple assignments to same column") where SQLite
    # silently keeps the rightmost assignment, or (last case) overwrites the row's key with the
    # fence and compares the key with it.
    with pytest.raises(InvalidArgumentError):
        fenced_write_sql("t", key_column, columns, fence_column=fence_column)


def test_a_reserved_word_column_reads_the_same_on_postgresql_and_sqlite(pg: psycopg.Connection[Any]) -> None:
    # Unquoted, PostgreSQL's `RETURNING user` is the session's user name, not the column "user"
    # (SQLite returns the column): the read "succeeded" with a wrong value.
    pg.execute('DROP TABLE IF EXISTS profiles')
    pg.execute('CREATE TABLE profiles (id TEXT PRIMARY KEY, "user" TEXT NOT NULL, '
               'last_fence BIGINT NOT NULL DEFAULT 0)')
    pg.execute("""INSERT INTO profiles (id, "user") VALUES ('p', 'alice')""")
    lite = sqlite3.connect(":memory:")
    lite.execute('CREATE TABLE profiles (id TEXT PRIMARY KEY, "user" TEXT NOT NULL, '
                 'last_fence INTEGER NOT NULL DEFAULT 0)')
    lite.execute("""INSERT INTO profiles (id, "user") VALUES ('p', 'alice')""")
    pg_read = fenced_read_sql("profiles", "id", ["user"], paramstyle="pyformat")
    lite_read = fenced_read_sql("profiles", "id", ["user"])
    assert lite.execute(lite_read, {"key": "p", "fence": 1}).fetchall() == [("alice",)]
    rows = pg.execute(pg_read, {"key": "p", "fence": 1}).fetchall()
    assert rows == [("alice",)], f"PostgreSQL read {rows} through {pg_read!r}"
