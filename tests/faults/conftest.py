"""Fixtures of the fault suite: the resource server, apart from every lock server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from turbolock.redis_server import RedisServer

from ._summary import ROWS, table


@pytest.fixture(scope="session")
def resource_server() -> Iterator[RedisServer]:
    """The resource the workers' locks protect (their counters): a server of its own, never
    faulted, so only the lock servers fail."""
    with RedisServer() as server:
        yield server


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The fault suite's table, when any fault ran."""
    if ROWS:
        terminalreporter.section("faults: what held under each fault")
        for line in table(ROWS):
            terminalreporter.write_line(line)
