"""RespParser fuzzed: generated replies parse to what they encode, on both cores; garbage is refused alike.

The replies are written by an encoder of this file's own (not the cores'), from Python values, so
the round trip checks both parsers against the values, not only against each other.
"""

from __future__ import annotations

import array
from functools import partial
from types import ModuleType

from _search_budget import budget
from hypothesis import given
from hypothesis import strategies as st

from turbolock._wire import core_py as _core_py
from turbolock._wire.core_compare import parser_trace
from turbolock.errors import ReplyError

MAX_NESTING = _core_py.MAX_NESTING
# The compiled core hands hiredis 16 KiB at a time and allocates arrays up to 2**16 items up
# front; replies around those sizes take the other paths.
_BIG_SIZES = [16383, 16384, 16385, 70000]
_LONG_COUNTS = [65535, 65536, 65537]


def _line_safe(data: bytes) -> bytes:
    return data.replace(b"\r", b"").replace(b"\n", b"")


@st.composite
def _leaf(draw: st.DrawFn, depth: int = 0) -> tuple[bytes, object]:
    """A reply that is not an array (a nil array aside, where one more array level is allowed)."""
    kind = draw(st.sampled_from(["simple", "bulk", "int", "error", "nil"]))
    if kind == "simple":
        text = _line_safe(draw(st.binary(max_size=20)))
        return b"+%b\r\n" % text, text
    if kind == "bulk":
        if draw(st.integers(0, 19)) == 0:
            size = draw(st.sampled_from(_BIG_SIZES))
            data = (draw(st.binary(min_size=1, max_size=8)) * size)[:size]
        else:
            data = draw(st.binary(max_size=30))
        return b"$%d\r\n%b\r\n" % (len(data), data), data
    if kind == "int":
        bounds = st.sampled_from([0, -1, 2**63 - 1, -(2**63)])
        value = draw(st.one_of(st.integers(-(2**63), 2**63 - 1), bounds))
        return b":%d\r\n" % value, value
    if kind == "error":
        text = _line_safe(draw(st.binary(max_size=20)))
        return b"-%b\r\n" % text, ReplyError(text.decode("utf-8", "replace"))
    nils = [(b"$-1\r\n", None), (b"*-1\r\n", None)]
    return draw(st.sampled_from(nils if depth < MAX_NESTING else nils[:1]))


@st.composite
def _reply(draw: st.DrawFn, depth: int = 0) -> tuple[bytes, object]:
    """A reply (wire, value); arrays nest at most MAX_NESTING deep, as both cores allow."""
    if depth < MAX_NESTING and draw(st.integers(0, 3)) == 0:
        if draw(st.integers(0, 49)) == 0:
            count = draw(st.sampled_from(_LONG_COUNTS))
            value = draw(st.integers(-9, 99))
            item = b":%d\r\n" % value
            return b"*%d\r\n" % count + item * count, [value] * count
        items = draw(st.lists(_reply(depth + 1), max_size=4))
        return b"*%d\r\n" % len(items) + b"".join(w for w, _ in items), [v for _, v in items]
    if depth < MAX_NESTING and draw(st.integers(0, 29)) == 0:
        # The deepest chain allowed: arrays down to MAX_NESTING levels, then a leaf below them
        # (or, as the last level, an empty or nil array).
        if draw(st.booleans()):
            wire, value = draw(st.sampled_from([(b"*0\r\n", []), (b"*-1\r\n", None)]))
            levels = MAX_NESTING - depth - 1
        else:
            wire, value = draw(_leaf(MAX_NESTING))
            levels = MAX_NESTING - depth
        for _ in range(levels):
            wire, value = b"*1\r\n" + wire, [value]
        return wire, value
    return draw(_leaf(depth))


_replies = st.lists(_reply(), min_size=1, max_size=10)


def _trace(
    core: ModuleType, stream: bytes, cuts: list[int], limits: list[int], kind: type = bytes
) -> list[object]:
    """Feed ``stream`` in pieces (as ``kind``), reading after each: what each step gave back."""
    return parser_trace(core, stream, cuts, limits, partial(_as, kind))


def _as(kind: type, data: bytes) -> object:
    if kind is memoryview:
        return memoryview(data)
    if kind is array.array:
        return array.array("B", data)
    return kind(data)


def _replies_of(trace: list[object]) -> list[object]:
    """Every reply a trace gave back, in order (a refusal ends a trace and gives none)."""
    return [reply for step in trace if isinstance(step[0], list) for reply in step[0]]  # type: ignore[index]


@budget(100)
@given(data=st.data(), replies=_replies, limits=st.lists(st.integers(-1, 3), min_size=1, max_size=4))
def test_replies_round_trip(
    core: ModuleType, data: st.DataObject, replies: list[tuple[bytes, object]], limits: list[int]
) -> None:
    """Every reply comes back as the value it was written from, whatever pieces the stream came in."""
    stream = b"".join(wire for wire, _ in replies)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=6))
    trace = _trace(core, stream, cuts, limits)
    assert _replies_of(trace) == [value for _, value in replies]
    assert trace[-1][1] == 0  # type: ignore[index]


# Bytes that often look like RESP: type bytes, digits, signs and line ends.
_resp_alphabet = st.sampled_from([bytes([b]) for b in b"+-:$*0123456789\r\n x\x00\xff"])
_resp_ish = st.lists(_resp_alphabet, max_size=40).map(b"".join)
_garbage = st.one_of(st.binary(max_size=40), _resp_ish)


@budget(200)
@given(
    data=st.data(),
    head=st.lists(_reply(), max_size=3),
    garbage=_garbage,
    tail=st.lists(_reply(), max_size=2),
    limits=st.lists(st.integers(-1, 3), min_size=1, max_size=4),
)
def test_garbage_is_refused_alike(
    core_c: ModuleType,
    data: st.DataObject,
    head: list[tuple[bytes, object]],
    garbage: bytes,
    tail: list[tuple[bytes, object]],
    limits: list[int],
) -> None:
    """Replies, then arbitrary bytes: the same replies, then the same refusal (or wait) at the same point."""
    stream = b"".join(w for w, _ in head) + garbage + b"".join(w for w, _ in tail)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=6))
    c_trace = _trace(core_c, stream, cuts, limits)
    assert c_trace == _trace(_core_py, stream, cuts, limits)
    # A refusal loses the replies of its own get_replies() call; those given back come in order.
    given_back = _replies_of(c_trace)[: len(head)]
    assert given_back == [value for _, value in head][: len(given_back)]


@budget(40)
@given(
    data=st.data(),
    replies=_replies,
    garbage=_garbage,
    kind=st.sampled_from([bytearray, memoryview, array.array]),
)
def test_any_contiguous_buffer_feeds_as_bytes_do(
    core: ModuleType, data: st.DataObject, replies: list[tuple[bytes, object]], garbage: bytes, kind: type
) -> None:
    stream = b"".join(wire for wire, _ in replies) + garbage
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=4))
    assert _trace(core, stream, cuts, [-1], kind) == _trace(core, stream, cuts, [-1])


def test_a_strided_buffer_is_refused_alike(core: ModuleType) -> None:
    # The compiled core raised BufferError here, the pure one TypeError.
    parser = core.RespParser()
    for data in (memoryview(b"+OK\r\n+OK\r\n")[::2], "+OK\r\n", None):
        try:
            parser.feed(data)
        except TypeError:
            continue
        raise AssertionError(f"fed {data!r}")
    parser.feed(b"+OK\r\n")
    assert parser.get_replies() == [b"OK"]
