"""CommandBuffer.append_set_nx_px_random: SET NX PX with tokens the buffer draws from the OS CSPRNG."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from _search_budget import budget
from hypothesis import given
from hypothesis import strategies as st

from turbolock._wire import core_py as _core_py

BINARY = b"\xff\x00\r\n\xfe"
NAMES = [b"a", BINARY, b"", b"lock:42"]


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def _set(key: bytes, token: bytes, ttl: bytes) -> bytes:
    return b"*6\r\n" + b"".join(_bulk(a) for a in (b"SET", key, token, b"NX", b"PX", ttl))


def _many(core: ModuleType, prefix: bytes, names: list[Any], tokens: list[bytes], ttl: object) -> bytes:
    buffer = core.CommandBuffer(prefix)
    buffer.append_set_nx_px_many(names, tokens, ttl)
    return buffer.take()


@pytest.mark.parametrize("prefix", [b"", b"app:", BINARY], ids=["no-prefix", "prefix", "binary-prefix"])
@pytest.mark.parametrize("token_size", [16, 17, 100, 1024])
def test_encodes_like_set_nx_px_many_with_the_returned_tokens(
    core: ModuleType, prefix: bytes, token_size: int
) -> None:
    buffer = core.CommandBuffer(prefix)
    tokens = buffer.append_set_nx_px_random(NAMES, 30000, token_size)
    assert buffer.pending == len(NAMES)
    wire = buffer.take()
    assert wire == _many(core, prefix, NAMES, tokens, 30000)
    assert wire == b"".join(_set(prefix + n, t, b"30000") for n, t in zip(NAMES, tokens, strict=True))


def test_tokens_are_fresh_bytes_of_the_asked_size(core: ModuleType) -> None:
    buffer = core.CommandBuffer()
    tokens = buffer.append_set_nx_px_random((b"a", b"b", b"c"), 1)
    assert type(tokens) is list
    assert [(type(t), len(t)) for t in tokens] == [(bytes, 16)] * 3
    for size in (16, 31, 1024):
        assert {len(t) for t in buffer.append_set_nx_px_random([b"x"] * 5, 1, size)} == {size}
    assert len(buffer.append_set_nx_px_random([b"x"], 1, token_size=20)[0]) == 20


def test_accepts_any_iterable_of_names(core: ModuleType) -> None:
    buffer = core.CommandBuffer(b"p:")
    tokens = buffer.append_set_nx_px_random(iter(NAMES), 5)
    assert buffer.take() == _many(core, b"p:", NAMES, tokens, 5)


def test_appends_after_what_is_there(core: ModuleType) -> None:
    buffer = core.CommandBuffer(b"p:")
    buffer.append_pttl(b"before")
    tokens = buffer.append_set_nx_px_random([b"a", b"b"], 7)
    buffer.append_pttl(b"after")
    assert buffer.pending == 4
    assert buffer.take() == (
        b"*2\r\n$4\r\nPTTL\r\n$8\r\np:before\r\n"
        + _many(core, b"p:", [b"a", b"b"], tokens, 7)
        + b"*2\r\n$4\r\nPTTL\r\n$7\r\np:after\r\n"
    )


def test_tokens_are_distinct_within_and_across_calls(core: ModuleType) -> None:
    names = [b"lock:%d" % i for i in range(100_000)]
    buffer = core.CommandBuffer()
    first = buffer.append_set_nx_px_random(names, 1000)
    second = buffer.append_set_nx_px_random(names, 1000)
    assert len(first) == len(second) == len(names)
    assert len(set(first) | set(second)) == 2 * len(names)
    assert buffer.pending == 2 * len(names)
    assert buffer.take() == _many(core, b"", names + names, first + second, 1000)


def test_small_calls_draw_distinct_tokens(core: ModuleType) -> None:
    buffer = core.CommandBuffer()
    tokens = [buffer.append_set_nx_px_random([b"n"], 1)[0] for _ in range(10_000)]
    assert len(set(tokens)) == len(tokens)


@pytest.mark.parametrize("names", [[], ()], ids=["list", "tuple"])
def test_no_names_no_commands(core: ModuleType, names: list[bytes]) -> None:
    buffer = core.CommandBuffer(b"p:")
    assert buffer.append_set_nx_px_random(names, 1) == []
    assert (len(buffer), buffer.pending, buffer.take()) == (0, 0, b"")
    buffer.append_pttl(b"x")
    assert buffer.append_set_nx_px_random(iter([]), 1, 1024) == []
    assert buffer.pending == 1


class _Bytes(bytes):
    pass


def _size_error(value: str) -> str:
    return f"token_size must be an int from 16 to 1024, not {value}"


BAD_CALLS: list[tuple[str, Callable[[Any], object], type[Exception], str]] = [
    ("name-str", lambda b: b.append_set_nx_px_random(["n"], 1), TypeError, "expected bytes, not str"),
    (
        "name-last",
        lambda b: b.append_set_nx_px_random([b"a", b"b", bytearray(b"c")], 1),
        TypeError,
        "expected bytes, not bytearray",
    ),
    (
        "name-subclass",
        lambda b: b.append_set_nx_px_random([b"a", _Bytes(b"b")], 1),
        TypeError,
        "expected bytes, not _Bytes",
    ),
    ("name-none", lambda b: b.append_set_nx_px_random([None], 1), TypeError, "expected bytes, not NoneType"),
    ("names-bytes", lambda b: b.append_set_nx_px_random(b"ab", 1), TypeError, "expected bytes, not int"),
    ("ttl-str", lambda b: b.append_set_nx_px_random([b"a"], "1"), TypeError, ""),
    ("ttl-none", lambda b: b.append_set_nx_px_random([b"a"], None), TypeError, ""),
    ("size-small", lambda b: b.append_set_nx_px_random([b"a"], 1, 15), ValueError, _size_error("15")),
    ("size-zero", lambda b: b.append_set_nx_px_random([], 1, 0), ValueError, _size_error("0")),
    ("size-negative", lambda b: b.append_set_nx_px_random([b"a"], 1, -16), ValueError, _size_error("-16")),
    ("size-big", lambda b: b.append_set_nx_px_random([b"a"], 1, 1025), ValueError, _size_error("1025")),
    (
        "size-huge",
        lambda b: b.append_set_nx_px_random([b"a"], 1, 2**70),
        ValueError,
        _size_error(str(2**70)),
    ),
    ("size-bool", lambda b: b.append_set_nx_px_random([b"a"], 1, True), ValueError, _size_error("True")),
    ("size-float", lambda b: b.append_set_nx_px_random([b"a"], 1, 16.0), ValueError, _size_error("16.0")),
    ("size-str", lambda b: b.append_set_nx_px_random([b"a"], 1, "16"), ValueError, _size_error("'16'")),
    ("size-none", lambda b: b.append_set_nx_px_random([b"a"], 1, None), ValueError, _size_error("None")),
    # token_size is checked first, then the TTL, then the names.
    ("size-before-ttl", lambda b: b.append_set_nx_px_random([b"a"], "x", 8), ValueError, _size_error("8")),
    ("ttl-before-names", lambda b: b.append_set_nx_px_random(["a"], "x"), TypeError, ""),
]


@pytest.mark.parametrize(("name", "call", "error", "message"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_refused_input_leaves_the_buffer_unchanged(
    core: ModuleType, name: str, call: Callable[[Any], object], error: type[Exception], message: str
) -> None:
    buffer = core.CommandBuffer(b"p:")
    buffer.append_pttl(b"before")
    with pytest.raises(error) as raised:
        call(buffer)
    if message:
        assert str(raised.value) == message
    assert buffer.pending == 1
    assert buffer.take() == b"*2\r\n$4\r\nPTTL\r\n$8\r\np:before\r\n"


def test_ttl_errors_match_set_nx_px_many(core: ModuleType) -> None:
    for ttl in ("x", None, 1.5j):
        buffer = core.CommandBuffer()
        with pytest.raises(TypeError) as expected:
            buffer.append_set_nx_px_many([b"a"], [b"t" * 16], ttl)
        with pytest.raises(TypeError) as raised:
            buffer.append_set_nx_px_random([b"a"], ttl)
        assert str(raised.value) == str(expected.value)


@pytest.mark.rss
def test_repeated_calls_do_not_grow_the_process(core: ModuleType) -> None:
    names = [b"lock:%d" % i for i in range(1000)]
    buffer = core.CommandBuffer(b"app:")

    def rounds(count: int) -> None:
        for _ in range(count):
            buffer.append_set_nx_px_random(names, 30000, 64)
            buffer.take()
            with pytest.raises(TypeError):
                buffer.append_set_nx_px_random([*names, "bad"], 30000)
            with pytest.raises(ValueError):
                buffer.append_set_nx_px_random(names, 30000, 8)

    def rss() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    rounds(20)
    gc.collect()
    before = rss()
    rounds(500)
    gc.collect()
    # A leaked token or token list per round would be 500 * 1000 objects: tens of megabytes.
    assert rss() - before < 8 * 2**20


_name = st.binary(max_size=20)
_bad = st.sampled_from(["str", 1, None, bytearray(b"x"), 1.5])
_ttl = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([0, 1, 30000, True, 2.5, "x", None]))
_token_size = st.one_of(st.integers(16, 1024), st.sampled_from([0, 15, 1025, -1, True, 16.0, "16", None]))


def _random(
    core: ModuleType, prefix: bytes, names: list[object], ttl: object, token_size: object, before: bool
) -> tuple[object, list[bytes] | None, int, bytes]:
    buffer = core.CommandBuffer(prefix)
    if before:
        buffer.append_pttl(b"before")
    try:
        tokens = buffer.append_set_nx_px_random(names, ttl, token_size)
        outcome: object = None
    except (TypeError, ValueError) as exc:
        tokens = None
        outcome = (type(exc), str(exc))
    return outcome, tokens, buffer.pending, buffer.take()


@budget(300)
@given(
    data=st.data(),
    prefix=_name,
    names=st.lists(_name, max_size=8),
    ttl=_ttl,
    token_size=_token_size,
    before=st.booleans(),
)
def test_cores_encode_alike_given_the_returned_tokens(
    core_c: ModuleType,
    data: st.DataObject,
    prefix: bytes,
    names: list[object],
    ttl: object,
    token_size: object,
    before: bool,
) -> None:
    if names and data.draw(st.booleans()):
        names[data.draw(st.integers(0, len(names) - 1))] = data.draw(_bad)
    c_outcome, c_tokens, c_pending, c_wire = _random(core_c, prefix, names, ttl, token_size, before)
    py_outcome, py_tokens, py_pending, py_wire = _random(_core_py, prefix, names, ttl, token_size, before)
    assert (c_outcome, c_pending) == (py_outcome, py_pending)
    head = b"*2\r\n$4\r\nPTTL\r\n" + _bulk(prefix + b"before") if before else b""
    if c_outcome is not None:
        assert c_wire == py_wire == head
        return
    assert c_tokens is not None and py_tokens is not None
    assert [len(t) for t in c_tokens] == [len(t) for t in py_tokens] == [token_size] * len(names)
    # Each core's output is what the other core encodes for the same tokens.
    assert c_wire == head + _many(_core_py, prefix, names, c_tokens, ttl)
    assert py_wire == head + _many(core_c, prefix, names, py_tokens, ttl)
