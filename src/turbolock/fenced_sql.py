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

from turbolock.errors import InvalidArgumentError, InvalidArgumentTypeError

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLACEHOLDERS = {"named": ":{}", "pyformat": "%({})s"}
_PARAMETERS = ("key", "fence")
"""The statements' own parameters: no column may be named so (it would share their value)."""


def _identifier(name: object, argument: str) -> str:
    """``name`` quoted: a reserved word (``user``, ``order``) is then the column on every database
    (PostgreSQL reads a bare ``user`` as the session's user), and case matters."""
    if not isinstance(name, str):
        raise InvalidArgumentTypeError(argument, f"must be str, not {type(name).__name__}")
    if not _IDENTIFIER.match(name):
        raise InvalidArgumentError(argument, "must be a plain SQL identifier (letters, digits, _)")
    return f'"{name}"'


def _statement_names(table: object, key_column: object, fence_column: object,
                     columns: object) -> tuple[str, str, str, list[tuple[str, str]]]:
    """The quoted table, key column and fence column, and each column (name, quoted), every one
    checked: no column given twice, none the key's or the fence's, none named ``key``/``fence``."""
    if isinstance(columns, str | bytes) or not isinstance(columns, Sequence):
        raise InvalidArgumentTypeError("columns", "must be a list of column names, not "
                                                  f"{type(columns).__name__}")
    names = [(column, _identifier(column, "columns")) for column in columns]
    key, fence = _identifier(key_column, "key_column"), _identifier(fence_column, "fence_column")
    # Compared without case: SQLite's identifiers ignore it even quoted ("ID" is id there).
    assert isinstance(key_column, str) and isinstance(fence_column, str)
    if key_column.casefold() == fence_column.casefold():
        raise InvalidArgumentError("fence_column", "must not be the key column")
    plain = [column for column, _ in names]
    if len({column.casefold() for column in plain}) != len(plain):
        raise InvalidArgumentError("columns", "names a column twice")
    for column in plain:
        if column.casefold() in (key_column.casefold(), fence_column.casefold()):
            raise InvalidArgumentError("columns", f"{column!r} is the key or the fence column, which the "
                                                  "statement sets itself")
        if column in _PARAMETERS:
            raise InvalidArgumentError("columns", f"a column named {column!r} would share the statement's "
                                                  f"own {column!r} parameter; rename it or write the "
                                                  "statement by hand")
    return _identifier(table, "table"), key, fence, names


def _placeholder(paramstyle: str) -> str:
    if not isinstance(paramstyle, str):
        raise InvalidArgumentTypeError("paramstyle", f"must be str, not {type(paramstyle).__name__}")
    if paramstyle not in _PLACEHOLDERS:
        raise InvalidArgumentError("paramstyle", "must be 'named' (sqlite3) or 'pyformat' (psycopg)")
    return _PLACEHOLDERS[paramstyle]


def fenced_write_sql(table: str, key_column: str, columns: Sequence[str], fence_column: str = "last_fence",
                     paramstyle: str = "named") -> str:
    """``UPDATE table SET <columns>, fence_column = <fence> WHERE key_column = <key> AND
    fence_column <= <fence>``, with parameters named after the columns plus ``key`` and
    ``fence``; identifiers quoted, a row with no fence yet (NULL) taken as fence 0. Zero rows
    updated: a newer holder has been there (or no such row)."""
    mark = _placeholder(paramstyle)
    table, key_column, fence_column, names = _statement_names(table, key_column, fence_column, columns)
    if not names:
        raise InvalidArgumentError("columns", "must name at least one column to write")
    assignments = [f"{quoted} = {mark.format(column)}" for column, quoted in names]
    fence = mark.format("fence")
    return (f"UPDATE {table} SET {', '.join(assignments)}, {fence_column} = {fence} "
            f"WHERE {_fresh(table, key_column, fence_column, mark)}")


def fenced_read_sql(table: str, key_column: str, columns: Sequence[str], fence_column: str = "last_fence",
                    paramstyle: str = "named") -> str:
    """``UPDATE ... SET fence_column = <fence> WHERE ... AND fence_column <= <fence> RETURNING
    <columns>``: a read that records the fence (no row back: a newer holder has been there, or
    there is no such row).
    Needs ``RETURNING`` (PostgreSQL, SQLite 3.35+)."""
    mark = _placeholder(paramstyle)
    table, key_column, fence_column, names = _statement_names(table, key_column, fence_column, columns)
    if not names:
        raise InvalidArgumentError("columns", "must name at least one column to read")
    returned = ", ".join(f"{table}.{quoted}" for _, quoted in names)
    return (f"UPDATE {table} SET {fence_column} = {mark.format('fence')} "
            f"WHERE {_fresh(table, key_column, fence_column, mark)} RETURNING {returned}")


def _fresh(table: str, key_column: str, fence_column: str, mark: str) -> str:
    """The row of the key, if no newer fence than the statement's has been there: its last
    fence, or none yet (a column added to rows already there holds NULL). The column is compared
    bare, not through ``COALESCE``, which would drop its INTEGER affinity on SQLite: a fence
    given as text would then compare as a string, above every number, and a stale one pass. Columns
    read here carry the table's name: SQLite takes an unknown double-quoted name standing alone
    for a string, so a misspelled column would read as its own name instead of failing. (A
    ``SET`` target takes none: PostgreSQL refuses it, and SQLite fails on an unknown one.)"""
    fence = mark.format("fence")
    return (f"{table}.{key_column} = {mark.format('key')} "
            f"AND ({table}.{fence_column} IS NULL OR {table}.{fence_column} <= {fence})")
