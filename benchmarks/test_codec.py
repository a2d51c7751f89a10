"""The core alone, no I/O: encoding 1000 lock commands and parsing 1000 replies, per core."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from turbolock._wire import scripts as _scripts
from turbolock.bench.workload import KEY_PREFIX, TTL_MS

COUNT = 1000
NAMES = [f"codec:{i:012d}".encode() for i in range(COUNT)]
TOKENS = [b"%016d" % i for i in range(COUNT)]


@pytest.mark.benchmark(group="encode 1000 SET NX PX")
def test_encode_set_nx_px(benchmark: Any, core: ModuleType) -> None:
    buf = core.CommandBuffer(KEY_PREFIX.encode())

    def encode() -> bytes:
        buf.append_set_nx_px_many(NAMES, TOKENS, TTL_MS)
        data: bytes = buf.take()
        return data

    data = benchmark(encode)
    assert data.count(b"$3\r\nSET\r\n") == COUNT
    assert data.endswith(b"$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n60000\r\n")


@pytest.mark.benchmark(group="encode 1000 EVALSHA release")
def test_encode_evalsha(benchmark: Any, core: ModuleType) -> None:
    buf = core.CommandBuffer(KEY_PREFIX.encode())
    sha = _scripts.RELEASE.sha

    def encode() -> bytes:
        buf.append_evalsha_many(sha, NAMES, TOKENS)
        data: bytes = buf.take()
        return data

    data = benchmark(encode)
    assert data.count(b"$7\r\nEVALSHA\r\n$40\r\n" + sha) == COUNT


@pytest.mark.parametrize(("wire", "expected"), [(b"+OK\r\n", b"OK"), (b":1\r\n", 1), (b"$-1\r\n", None)],
                         ids=["ok", "int", "nil"])
@pytest.mark.benchmark(group="parse 1000 replies")
def test_parse_replies(benchmark: Any, core: ModuleType, wire: bytes, expected: object) -> None:
    parser = core.RespParser()
    data = wire * COUNT

    def parse() -> list[object]:
        parser.feed(data)
        replies: list[object] = parser.get_replies()
        return replies

    assert benchmark(parse) == [expected] * COUNT
