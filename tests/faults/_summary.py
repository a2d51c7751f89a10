"""The summary table of a fault run: one row per fault, printed at the end of the pytest run
(``conftest.pytest_terminal_summary``) as a Markdown table, the README's format."""

from __future__ import annotations

from typing import NamedTuple


class Row(NamedTuple):
    fault: str
    topology: str
    cores: str
    sections: int
    found: str
    expected: str
    verdict: str


ROWS: list[Row] = []
HEADER = ("fault", "topology", "cores", "sections", "violations found", "expected", "verdict")


def table(rows: list[Row]) -> list[str]:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * 2 + "---|---:|---|---|---|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines
