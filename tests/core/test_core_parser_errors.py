"""RespParser on bytes that are not RESP2: ProtocolError, then the parser refuses all use."""

from __future__ import annotations

from types import ModuleType

import pytest

from turbolock.errors import ProtocolError

BAD_TYPE_BYTES = [b"x", b"\x00", b"\r\n", b"GET / HTTP/1.1\r\n", b"*2\r\n:1\r\n?", b"+OK\r\n!"]
BAD_NUMBERS = [
    b":abc\r\n",
    b":\r\n",
    b":+1\r\n",
    b":1.5\r\n",
    b":- 1\r\n",
    b":99999999999999999999\r\n",
    b"$abc\r\n",
    b"$\r\n",
    b"$1x\r\n",
    b"$-2\r\n",
    b"$99999999999999999999\r\n",
    b"*x\r\n",
    b"*-2\r\n",
    b"*1\r\n:z\r\n",
]


def _nested(arrays: int, leaf: bytes = b":1\r\n") -> bytes:
    return b"*1\r\n" * arrays + leaf


@pytest.mark.parametrize("wire", BAD_TYPE_BYTES)
def test_bad_type_byte(core: ModuleType, wire: bytes) -> None:
    parser = core.RespParser()
    parser.feed(wire)
    with pytest.raises(ProtocolError) as raised:
        parser.get_replies()
    # The pure core spells the byte with Python's repr, hiredis with C-style quoting.
    assert str(raised.value).startswith("Protocol error, got ")
    assert str(raised.value).endswith(" as reply type byte")


@pytest.mark.parametrize("wire", BAD_NUMBERS)
def test_bad_number(core: ModuleType, wire: bytes) -> None:
    parser = core.RespParser()
    parser.feed(wire)
    with pytest.raises(ProtocolError):
        parser.get_replies()


@pytest.mark.parametrize("wire", [b"x", b":abc\r\n", _nested(8)])
def test_broken_parser_refuses_further_use(core: ModuleType, wire: bytes) -> None:
    parser = core.RespParser()
    parser.feed(b"+OK\r\n" + wire)
    with pytest.raises(ProtocolError) as raised:
        parser.get_replies()
    message = str(raised.value)
    assert parser.buffered() == 0
    for _ in range(2):
        with pytest.raises(ProtocolError, match="^" + message.replace("\\", "\\\\") + "$"):
            parser.get_replies()
        with pytest.raises(ProtocolError, match="^" + message.replace("\\", "\\\\") + "$"):
            parser.feed(b"+OK\r\n")


def test_error_inside_a_half_built_array(core: ModuleType) -> None:
    parser = core.RespParser()
    parser.feed(b"*3\r\n:1\r\n*2\r\n+a\r\n")
    assert parser.get_replies() == []
    parser.feed(b"?")
    with pytest.raises(ProtocolError):
        parser.get_replies()


def test_nesting_up_to_the_limit(core: ModuleType) -> None:
    parser = core.RespParser()
    parser.feed(_nested(core.MAX_NESTING) + _nested(core.MAX_NESTING, b"*-1\r\n"))
    deepest: object = 1
    for _ in range(core.MAX_NESTING):
        deepest = [deepest]
    nil: object = None
    for _ in range(core.MAX_NESTING):
        nil = [nil]
    assert parser.get_replies() == [deepest, nil]


@pytest.mark.parametrize("leaf", [b":1\r\n", b"*0\r\n", b""])
def test_nesting_deeper_than_the_limit(core: ModuleType, leaf: bytes) -> None:
    arrays = core.MAX_NESTING + (0 if leaf == b"*0\r\n" else 1)
    parser = core.RespParser()
    parser.feed(_nested(arrays, leaf))
    with pytest.raises(ProtocolError, match=r"^No support for nested multi bulk replies with depth > 7$"):
        parser.get_replies()


@pytest.mark.parametrize("wire", [b":007\r\n", b":-0\r\n", b"$03\r\nabc\r\n", b"*-01\r\n"])
def test_non_canonical_numbers_are_refused(
    core: ModuleType, wire: bytes, request: pytest.FixtureRequest
) -> None:
    if core.IMPLEMENTATION == "py":
        request.applymarker(
            pytest.mark.xfail(
                strict=True, reason="the pure core accepts leading zeros and -0, which hiredis refuses"
            )
        )
    parser = core.RespParser()
    parser.feed(wire)
    with pytest.raises(ProtocolError):
        parser.get_replies()
