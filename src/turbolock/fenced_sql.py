"""The resource's half of fencing for SQL: the statements that refuse an old lock grant.

Keep ``last_fence`` in the row; the same check as ``turbolock.fencing.FencedStore`` is then one
statement:

    UPDATE accounts SET balance = :balance, last_fence = :fence
     WHERE id = :id AND last_fence <= :fence

and a read that records the fence: ``UPDATE accounts SET last_fence = :fence WHERE id = :id AND
last_fence <= :fence RETURNING balance`` (or ``SELECT ... FOR UPDATE`` in the same transaction as
the write). Zero rows updated means a newer holder has been there: drop the work.
``fenced_write_sql`` and ``fenced_read_sql`` write those statements for a table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from turbolock.errors import InvalidArgumentError

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLACEHOLDERS = {"named": ":{}", "pyformat": "%({})s"}


def _identifier(name: object, argument: str) -> str:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise InvalidArgumentError(argument, "must be a plain SQL identifier (letters, digits, _)")
    return name


def _table_names(table: str, key_column: str, fence_column: str) -> tuple[str, str, str]:
    return (_identifier(table, "table"), _identifier(key_column, "key_column"),
            _identifier(fence_column, "fence_column"))


def _placeholder(paramstyle: str) -> str:
    if paramstyle not in _PLACEHOLDERS:
        raise InvalidArgumentError("paramstyle", "must be 'named' (sqlite3) or 'pyformat' (psycopg)")
    return _PLACEHOLDERS[paramstyle]


def fenced_write_sql(table: str, key_column: str, columns: Sequence[str], fence_column: str = "last_fence",
                     paramstyle: str = "named") -> str:
    """``UPDATE table SET <columns>, fence_column = <fence> WHERE key_column = <key> AND
    fence_column <= <fence>``, with parameters named after the columns plus ``key`` and
    ``fence``. Zero rows updated: a newer holder has been there (or no such row)."""
    mark = _placeholder(paramstyle)
    table, key_column, fence_column = _table_names(table, key_column, fence_column)
    assignments = [f"{_identifier(column, 'columns')} = {mark.format(column)}" for column in columns]
    if not assignments:
        raise InvalidArgumentError("columns", "must name at least one column to write")
    fence = mark.format("fence")
    return (f"UPDATE {table} SET {', '.join(assignments)}, {fence_column} = {fence} "
            f"WHERE {key_column} = {mark.format('key')} AND {fence_column} <= {fence}")


def fenced_read_sql(table: str, key_column: str, columns: Sequence[str], fence_column: str = "last_fence",
                    paramstyle: str = "named") -> str:
    """``UPDATE ... SET fence_column = <fence> WHERE ... AND fence_column <= <fence> RETURNING
    <columns>``: a read that records the fence (no row back: a newer holder has been there).
    Needs ``RETURNING`` (PostgreSQL, SQLite 3.35+)."""
    mark = _placeholder(paramstyle)
    table, key_column, fence_column = _table_names(table, key_column, fence_column)
    returned = [_identifier(column, "columns") for column in columns]
    if not returned:
        raise InvalidArgumentError("columns", "must name at least one column to read")
    fence = mark.format("fence")
    return (f"UPDATE {table} SET {fence_column} = {fence} WHERE {key_column} = {mark.format('key')} "
            f"AND {fence_column} <= {fence} RETURNING {', '.join(returned)}")
