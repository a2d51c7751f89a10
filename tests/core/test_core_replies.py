"""RespParser on well-formed RESP2: every reply type, fed in pieces of any size."""

from __future__ import annotations

from types import ModuleType

import pytest

from turbolock.errors import ReplyError

VECTORS: list[tuple[str, bytes, object]] = [
    ("status", b"+OK\r\n", b"OK"),
    ("status-other", b"+PONG\r\n", b"PONG"),
    ("status-empty", b"+\r\n", b""),
    ("error", b"-ERR unknown command 'FOO'\r\n", ReplyError("ERR unknown command 'FOO'")),
    ("error-not-utf8", b"-ERR \xff\xfe\r\n", ReplyError("ERR \ufffd\ufffd")),
    ("integer-zero", b":0\r\n", 0),
    ("integer", b":1000\r\n", 1000),
    ("integer-negative", b":-2\r\n", -2),
    ("integer-max", b":9223372036854775807\r\n", 2**63 - 1),
    ("integer-min", b":-9223372036854775808\r\n", -(2**63)),
    ("bulk", b"$5\r\nhello\r\n", b"hello"),
    ("bulk-empty", b"$0\r\n\r\n", b""),
    ("bulk-binary", b"$8\r\n\x00a\r\nb\xff\r\n\r\n", b"\x00a\r\nb\xff\r\n"),
    ("bulk-nil", b"$-1\r\n", None),
    ("array-nil", b"*-1\r\n", None),
    ("array-empty", b"*0\r\n", []),
    ("array", b"*3\r\n:1\r\n$1\r\na\r\n+OK\r\n", [1, b"a", b"OK"]),
    ("array-nested", b"*2\r\n*1\r\n:1\r\n*2\r\n*0\r\n$-1\r\n", [[1], [[], None]]),
    (
        "array-errors-and-nils",
        b"*4\r\n$-1\r\n-ERR x\r\n*-1\r\n-NOSCRIPT y\r\n",
        [None, ReplyError("ERR x"), None, ReplyError("NOSCRIPT y")],
    ),
    # hiredis 0.14 allows 8 levels of arrays (MAX_NESTING), the innermost possibly empty or nil
    ("array-deepest-allowed", b"*1\r\n" * 7 + b"*0\r\n", [[[[[[[[]]]]]]]]),
    ("array-deepest-nil", b"*1\r\n" * 7 + b"*-1\r\n", [[[[[[[None]]]]]]]),
    ("array-deepest-leaf", b"*1\r\n" * 8 + b"$-1\r\n", [[[[[[[[None]]]]]]]]),
]
IDS = [name for name, _, _ in VECTORS]
STREAM = b"".join(wire for _, wire, _ in VECTORS)
REPLIES = [reply for _, _, reply in VECTORS]


@pytest.mark.parametrize(("name", "wire", "reply"), VECTORS, ids=IDS)
def test_whole_reply(core: ModuleType, name: str, wire: bytes, reply: object) -> None:
    parser = core.RespParser()
    parser.feed(wire)
    assert parser.get_replies() == [reply]
    assert parser.buffered() == 0
    assert parser.get_replies() == []


@pytest.mark.parametrize(("name", "wire", "reply"), VECTORS, ids=IDS)
def test_byte_by_byte(core: ModuleType, name: str, wire: bytes, reply: object) -> None:
    parser = core.RespParser()
    for i in range(len(wire) - 1):
        parser.feed(wire[i : i + 1])
        assert parser.get_replies() == []
        assert parser.buffered() == i + 1
    parser.feed(wire[-1:])
    assert parser.get_replies() == [reply]
    assert parser.buffered() == 0


@pytest.mark.parametrize(("name", "wire", "reply"), VECTORS, ids=IDS)
def test_two_pieces_at_every_offset(core: ModuleType, name: str, wire: bytes, reply: object) -> None:
    for cut in range(len(wire) + 1):
        parser = core.RespParser()
        parser.feed(wire[:cut])
        first = parser.get_replies()
        parser.feed(wire[cut:])
        assert first + parser.get_replies() == [reply], cut


def test_every_reply_in_one_stream_cut_anywhere(core: ModuleType) -> None:
    for cut in range(len(STREAM) + 1):
        parser = core.RespParser()
        parser.feed(STREAM[:cut])
        first = parser.get_replies()
        parser.feed(STREAM[cut:])
        assert first + parser.get_replies() == REPLIES, cut
        assert parser.buffered() == 0


def test_many_replies_in_one_feed(core: ModuleType) -> None:
    parser = core.RespParser()
    parser.feed(b"+OK\r\n$-1\r\n" * 5000)
    assert parser.get_replies() == [b"OK", None] * 5000
    assert parser.buffered() == 0


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_feed_accepts_bytes_like(core: ModuleType, kind: type) -> None:
    parser = core.RespParser()
    parser.feed(kind(b"+OK\r\n:1"))
    parser.feed(kind(b"\r\n"))
    assert parser.get_replies() == [b"OK", 1]


def test_feed_refuses_str(core: ModuleType) -> None:
    with pytest.raises(TypeError):
        core.RespParser().feed("+OK\r\n")


def test_limit(core: ModuleType) -> None:
    parser = core.RespParser()
    parser.feed(STREAM)
    assert parser.get_replies(0) == []
    assert parser.buffered() == len(STREAM)
    assert parser.get_replies(2) == REPLIES[:2]
    assert parser.buffered() == len(STREAM) - len(VECTORS[0][1]) - len(VECTORS[1][1])
    assert parser.get_replies(limit=3) == REPLIES[2:5]
    assert parser.get_replies(-1) == REPLIES[5:]
    assert parser.get_replies(5) == []
    assert parser.buffered() == 0


def test_buffered_counts_an_unfinished_reply_in_full(core: ModuleType) -> None:
    parser = core.RespParser()
    unfinished = b"*3\r\n:1\r\n$2\r\nab\r\n$5\r\nhe"
    parser.feed(b"+OK\r\n" + unfinished)
    assert parser.get_replies() == [b"OK"]
    assert parser.buffered() == len(unfinished)
    assert parser.get_replies() == []
    assert parser.buffered() == len(unfinished)
    parser.feed(b"llo\r\n+PA")
    assert parser.get_replies() == [[1, b"ab", b"hello"]]
    assert parser.buffered() == 3


def test_big_bulk_arriving_in_pieces(core: ModuleType) -> None:
    value = bytes(range(256)) * 400
    wire = b"+OK\r\n" * 300 + b"$%d\r\n%b\r\n" % (len(value), value)
    parser = core.RespParser()
    replies = []
    for start in range(0, len(wire), 4096):
        parser.feed(wire[start : start + 4096])
        replies += parser.get_replies()
    assert replies == [b"OK"] * 300 + [value]


@pytest.mark.parametrize(
    ("wire", "code"),
    [
        (b"-NOSCRIPT No matching script. Please use EVAL.\r\n", "NOSCRIPT"),
        (b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", "WRONGTYPE"),
        (b"-OOM command not allowed when used memory > 'maxmemory'.\r\n", "OOM"),
        (b"-READONLY You can't write against a read only replica.\r\n", "READONLY"),
    ],
)
def test_error_replies_are_returned_with_their_code(core: ModuleType, wire: bytes, code: str) -> None:
    parser = core.RespParser()
    parser.feed(wire + b":1\r\n")
    error, after = parser.get_replies()
    assert type(error) is ReplyError
    assert error.code == code
    assert str(error) == wire[1:-2].decode()
    assert after == 1


def test_max_nesting(core: ModuleType) -> None:
    assert core.MAX_NESTING == 8


def test_big_feed_read_in_steps(core: ModuleType) -> None:
    parser = core.RespParser()
    parser.feed(STREAM * 300 + STREAM[:-3])
    left = len(STREAM) * 301 - 3
    replies: list[object] = []
    while batch := parser.get_replies(7):
        for reply in batch:
            left -= len(VECTORS[len(replies) % len(VECTORS)][1])
            replies.append(reply)
        assert parser.buffered() == left
    assert replies == REPLIES * 300 + REPLIES[:-1]
    parser.feed(STREAM[-3:])
    assert parser.get_replies() == REPLIES[-1:]
    assert parser.buffered() == 0
