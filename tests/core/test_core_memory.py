"""Parsing, encoding and the timer wheel in a loop, error paths included, must not grow the process."""

from __future__ import annotations

import gc
import math
import os
from types import ModuleType

import pytest

from turbolock.errors import ProtocolError

ROUNDS = 300
# A leak of one small object per reply or per command, or of one parser or buffer per
# round, grows the process by tens of megabytes over ROUNDS; a healthy run by well under this.
ALLOWED_GROWTH = 8 * 2**20

REPLIES = (
    b"+OK\r\n$-1\r\n*-1\r\n:-42\r\n-NOSCRIPT No matching script\r\n$9\r\nvalue\r\nxx\r\n"
    b"*4\r\n:1\r\n*2\r\n$3\r\nabc\r\n-ERR in array\r\n*0\r\n$-1\r\n"
) * 200
REPLY_COUNT = 7 * 200
NAMES = [b"lock:%d" % i for i in range(1000)]
TOKENS = [b"%032x" % i for i in range(1000)]
SHA = b"e0e1f9fabfc9d4800c877a703b823ac0578ff831"
# Each error path holds a big value when it fails, so that leaking it would show.
BIG = b"$65536\r\n" + b"v" * 65536 + b"\r\n"
BROKEN = [
    b"*3\r\n:1\r\n*2\r\n" + BIG + b"?",  # fails inside a half-built nested array
    b"*2\r\n" + BIG + b"*1\r\n" * 8,  # too deep, after part of the array is built
    b"*2\r\n" + BIG + b":12x\r\n",
]


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _parse(core: ModuleType) -> None:
    parser = core.RespParser()
    parser.feed(REPLIES[:1000])
    replies = parser.get_replies()
    parser.feed(REPLIES[1000:])
    assert len(replies + parser.get_replies()) == REPLY_COUNT
    for wire in BROKEN:
        parser = core.RespParser()
        parser.feed(wire)
        with pytest.raises(ProtocolError):
            parser.get_replies()
        with pytest.raises(ProtocolError):
            parser.feed(b"+OK\r\n")
    abandoned = core.RespParser()  # dropped while holding a half-built reply
    abandoned.feed(b"*3\r\n" + BIG + b"*2\r\n:1\r\n")
    assert abandoned.get_replies() == []


def _encode(core: ModuleType) -> None:
    buffer = core.CommandBuffer(b"app:")
    buffer.append_set_nx_px_many(NAMES, TOKENS, 30000)
    buffer.append_evalsha_many(SHA, NAMES, TOKENS, 30000)
    buffer.append_evalsha_multikey(SHA, NAMES, TOKENS)
    buffer.append_pttl_many(NAMES)
    for name, token in zip(NAMES[:100], TOKENS[:100], strict=True):
        buffer.append_set_nx_px(name, token, 30000)
        buffer.append_evalsha(SHA, name, token)
        buffer.append_command([b"GET", name, 1, "x"])
    with pytest.raises(TypeError):
        buffer.append_set_nx_px_many([*NAMES[:500], "bad"], TOKENS[:501], 30000)
    with pytest.raises(ValueError):
        buffer.append_evalsha_multikey(SHA, NAMES, TOKENS[1:])
    assert len(buffer.take()) > 0
    core.CommandBuffer().append_pttl_many(NAMES)  # dropped holding its buffer


def _wheel(core: ModuleType) -> None:
    wheel = core.TimerWheel(0.01, 256, 1e6)
    for item in range(1, 5001):
        wheel.schedule(item, 1e6 + (item % 700) * 0.01)
    for item in range(1, 5001, 2):
        wheel.cancel(item)
    with pytest.raises(ValueError):
        wheel.schedule(1, math.nan)
    assert len(wheel.advance(1e6 + 3.0)) > 0
    abandoned = core.TimerWheel(0.01, 1024, 1e6)  # dropped holding entries
    for item in range(1, 3001):
        abandoned.schedule(item, 1e6 + item)


@pytest.mark.rss
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc/self/statm")
def test_no_growth_over_many_rounds(core: ModuleType) -> None:
    for _ in range(30):
        _parse(core)
        _encode(core)
        _wheel(core)
    gc.collect()
    before = _rss()
    for _ in range(ROUNDS):
        _parse(core)
        _encode(core)
        _wheel(core)
    gc.collect()
    assert _rss() - before < ALLOWED_GROWTH
