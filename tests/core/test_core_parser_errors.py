"""RespParser on bytes that are not RESP2: ProtocolError, then the parser refuses all use."""

from __future__ import annotations

import re
from types import ModuleType

import pytest

from turbolock._wire import core_py as _core_py
from turbolock.errors import ProtocolError

BAD_TYPE_BYTES = [
    (b"x", '"x"'),
    (b"\x00", '"\\x00"'),
    (b"\r\n", '"\\r"'),
    (b"\n", '"\\n"'),
    (b"\t", '"\\t"'),
    (b"\\", '"\\\\"'),
    (b'"', '"\\""'),
    (b"\xff", '"\\xff"'),
    (b"\x7f", '"\\x7f"'),
    (b" ", '" "'),
    (b"GET / HTTP/1.1\r\n", '"G"'),
    (b"*2\r\n:1\r\n?", '"?"'),
    (b"+OK\r\n!", '"!"'),
    (b"$1\r\nab\r\n", '"\\n"'),  # hiredis takes 2 bytes after a bulk string as its CRLF, unchecked
]
# (wire, hiredis 0.14.1's message): what the compiled core says, and now the pure one.
BAD_NUMBERS = [
    (b":abc\r\n", "Bad integer value"),
    (b":\r\n", "Bad integer value"),
    (b":-\r\n", "Bad integer value"),
    (b":+1\r\n", "Bad integer value"),
    (b":1.5\r\n", "Bad integer value"),
    (b":- 1\r\n", "Bad integer value"),
    (b": 1\r\n", "Bad integer value"),
    (b":1 \r\n", "Bad integer value"),
    (b":1_000\r\n", "Bad integer value"),
    (b":99999999999999999999\r\n", "Bad integer value"),
    (b":9223372036854775808\r\n", "Bad integer value"),
    (b":-9223372036854775809\r\n", "Bad integer value"),
    (b":" + b"9" * 5000 + b"\r\n", "Bad integer value"),
    (b"$abc\r\n", "Bad bulk string length"),
    (b"$\r\n", "Bad bulk string length"),
    (b"$1x\r\n", "Bad bulk string length"),
    (b"$-2\r\n", "Bulk string length out of range"),
    (b"$-9223372036854775808\r\n", "Bulk string length out of range"),
    (b"$99999999999999999999\r\n", "Bad bulk string length"),
    (b"*x\r\n", "Bad multi-bulk length"),
    (b"*\r\n", "Bad multi-bulk length"),
    (b"*-2\r\n", "Multi-bulk length out of range"),
    (b"*2147483648\r\n", "Multi-bulk length out of range"),
    (b"*9223372036854775807\r\n", "Multi-bulk length out of range"),
    (b"*1\r\n:z\r\n", "Bad integer value"),
    (b"*2\r\n:1\r\n$-5\r\n", "Bulk string length out of range"),
]
# hiredis's string2ll takes only canonical decimals: no leading zeros, no "-0", no "+".
NON_CANONICAL = [
    (b":007\r\n", "Bad integer value"),
    (b":-0\r\n", "Bad integer value"),
    (b":00\r\n", "Bad integer value"),
    (b":-01\r\n", "Bad integer value"),
    (b"$03\r\nabc\r\n", "Bad bulk string length"),
    (b"$-0\r\n", "Bad bulk string length"),
    (b"$-01\r\n", "Bad bulk string length"),
    (b"*-01\r\n", "Bad multi-bulk length"),
    (b"*01\r\n:1\r\n", "Bad multi-bulk length"),
    (b"*-0\r\n", "Bad multi-bulk length"),
]
TOO_DEEP = "No support for nested multi bulk replies with depth > 7"


def _nested(arrays: int, leaf: bytes = b":1\r\n") -> bytes:
    return b"*1\r\n" * arrays + leaf


def _refusal(core: ModuleType, wire: bytes) -> str:
    parser = core.RespParser()
    parser.feed(wire)
    with pytest.raises(ProtocolError) as raised:
        parser.get_replies()
    return str(raised.value)


@pytest.mark.parametrize(("wire", "spelling"), BAD_TYPE_BYTES)
def test_bad_type_byte(core: ModuleType, wire: bytes, spelling: str) -> None:
    assert _refusal(core, wire) == f"Protocol error, got {spelling} as reply type byte"


def test_every_bad_type_byte_is_spelled_alike(core_c: ModuleType) -> None:
    for byte in range(256):
        if byte in b"+-:$*":
            continue
        wire = bytes([byte]) + b"\r\n"
        assert _refusal(core_c, wire) == _refusal(_core_py, wire), byte
        assert _refusal(core_c, wire[:1]) == _refusal(_core_py, wire[:1]), byte


@pytest.mark.parametrize(("wire", "message"), BAD_NUMBERS + NON_CANONICAL)
def test_bad_number(core: ModuleType, wire: bytes, message: str) -> None:
    assert _refusal(core, wire) == message


@pytest.mark.parametrize(
    "wire",
    [
        b":0\r\n",
        b":-1\r\n",
        b":10\r\n",
        b":9223372036854775807\r\n",
        b":-9223372036854775808\r\n",
        b"$0\r\n\r\n",
        b"$10\r\n0123456789\r\n",
        b"*0\r\n",
        b"*-1\r\n",
        b"*2147483647\r\n",
    ],
)
def test_canonical_numbers_are_taken(core: ModuleType, wire: bytes) -> None:
    parser = core.RespParser()
    parser.feed(wire)
    assert len(parser.get_replies()) == (0 if wire.startswith(b"*2147483647") else 1)


@pytest.mark.parametrize("wire", [b"x", b":abc\r\n", _nested(9)])
def test_broken_parser_refuses_further_use(core: ModuleType, wire: bytes) -> None:
    parser = core.RespParser()
    parser.feed(b"+OK\r\n" + wire)
    with pytest.raises(ProtocolError) as raised:
        parser.get_replies()
    message = str(raised.value)
    assert parser.buffered() == 0
    for _ in range(2):
        with pytest.raises(ProtocolError, match="^" + re.escape(message) + "$"):
            parser.get_replies()
        with pytest.raises(ProtocolError, match="^" + re.escape(message) + "$"):
            parser.feed(b"+OK\r\n")


def test_error_inside_a_half_built_array(core: ModuleType) -> None:
    parser = core.RespParser()
    parser.feed(b"*3\r\n:1\r\n*2\r\n+a\r\n")
    assert parser.get_replies() == []
    parser.feed(b"?")
    with pytest.raises(ProtocolError, match=r'^Protocol error, got "\?" as reply type byte$'):
        parser.get_replies()


def test_nesting_up_to_the_limit(core: ModuleType) -> None:
    levels = core.MAX_NESTING
    parser = core.RespParser()
    parser.feed(_nested(levels) + _nested(levels - 1, b"*-1\r\n") + _nested(levels - 1, b"*0\r\n"))
    deepest: object = 1
    nil: object = None
    empty: object = []
    for _ in range(levels):
        deepest = [deepest]
    for _ in range(levels - 1):
        nil = [nil]
        empty = [empty]
    assert parser.get_replies() == [deepest, nil, empty]


@pytest.mark.parametrize(
    "leaf",
    [b"*1\r\n:1\r\n", b"*0\r\n", b"*-1\r\n", b"*x\r\n", b"*", b"*1", b"*1\r\n", b"*2\r\n$-1\r\n"],
)
def test_an_array_header_one_level_too_deep(core: ModuleType, leaf: bytes) -> None:
    # hiredis 0.14 refuses the header on its type byte, before reading its count (so even
    # "*x" or a lone "*" is refused for depth, not for its count).
    assert _refusal(core, _nested(core.MAX_NESTING, leaf)) == TOO_DEEP
    assert _refusal(core, b"*2\r\n:1\r\n" + _nested(core.MAX_NESTING - 1, leaf)) == TOO_DEEP


def test_too_deep_is_refused_as_soon_as_its_byte_arrives(core: ModuleType) -> None:
    parser = core.RespParser()
    parser.feed(_nested(core.MAX_NESTING, b""))
    assert parser.get_replies() == []
    parser.feed(b"*")
    with pytest.raises(ProtocolError, match=f"^{re.escape(TOO_DEEP)}$"):
        parser.get_replies()
