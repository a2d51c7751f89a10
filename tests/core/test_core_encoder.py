"""CommandBuffer: the exact bytes of every command, and input it refuses."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

SHA = b"e0e1f9fabfc9d4800c877a703b823ac0578ff831"
BINARY = b"\xff\x00\r\n\xfe"


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def _command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(_bulk(a) for a in args)


def _encode(core: ModuleType, prefix: bytes, append: Callable[[Any], None]) -> bytes:
    buffer = core.CommandBuffer(prefix)
    append(buffer)
    return buffer.take()


@pytest.mark.parametrize("prefix", [b"", b"app:", BINARY], ids=["no-prefix", "prefix", "binary-prefix"])
class TestVectors:
    def test_set_nx_px(self, core: ModuleType, prefix: bytes) -> None:
        wire = _encode(core, prefix, lambda b: b.append_set_nx_px(b"lock", b"tok", 30000))
        assert wire == _command(b"SET", prefix + b"lock", b"tok", b"NX", b"PX", b"30000")

    def test_set_nx_px_many(self, core: ModuleType, prefix: bytes) -> None:
        names, tokens = [b"a", BINARY, b""], [b"t1", b"", BINARY]
        wire = _encode(core, prefix, lambda b: b.append_set_nx_px_many(names, tokens, 5))
        assert wire == b"".join(
            _command(b"SET", prefix + n, t, b"NX", b"PX", b"5") for n, t in zip(names, tokens, strict=True)
        )

    def test_evalsha(self, core: ModuleType, prefix: bytes) -> None:
        wire = _encode(core, prefix, lambda b: b.append_evalsha(SHA, b"lock", b"tok"))
        assert wire == _command(b"EVALSHA", SHA, b"1", prefix + b"lock", b"tok")

    def test_evalsha_with_ttl(self, core: ModuleType, prefix: bytes) -> None:
        wire = _encode(core, prefix, lambda b: b.append_evalsha(SHA, BINARY, b"tok", 123))
        assert wire == _command(b"EVALSHA", SHA, b"1", prefix + BINARY, b"tok", b"123")

    @pytest.mark.parametrize("ttl", [None, 0, 2**31])
    def test_evalsha_many(self, core: ModuleType, prefix: bytes, ttl: int | None) -> None:
        names, tokens = [b"a", b"b"], [b"x", b"y"]
        wire = _encode(core, prefix, lambda b: b.append_evalsha_many(SHA, names, tokens, ttl))
        extra = () if ttl is None else (b"%d" % ttl,)
        assert wire == b"".join(
            _command(b"EVALSHA", SHA, b"1", prefix + n, t, *extra) for n, t in zip(names, tokens, strict=True)
        )

    @pytest.mark.parametrize("ttl", [None, 9000])
    def test_evalsha_multikey(self, core: ModuleType, prefix: bytes, ttl: int | None) -> None:
        names, tokens = [b"a", BINARY, b"c"], [b"x", b"y", b"z"]
        wire = _encode(core, prefix, lambda b: b.append_evalsha_multikey(SHA, names, tokens, ttl))
        extra = () if ttl is None else (b"%d" % ttl,)
        assert wire == _command(b"EVALSHA", SHA, b"3", *(prefix + n for n in names), *extra, *tokens)

    def test_evalsha_multikey_without_names(self, core: ModuleType, prefix: bytes) -> None:
        wire = _encode(core, prefix, lambda b: b.append_evalsha_multikey(SHA, [], [], 7))
        assert wire == _command(b"EVALSHA", SHA, b"0", b"7")

    def test_pttl(self, core: ModuleType, prefix: bytes) -> None:
        assert _encode(core, prefix, lambda b: b.append_pttl(BINARY)) == _command(b"PTTL", prefix + BINARY)

    def test_pttl_many(self, core: ModuleType, prefix: bytes) -> None:
        wire = _encode(core, prefix, lambda b: b.append_pttl_many(iter([b"a", b"b"])))
        assert wire == _command(b"PTTL", prefix + b"a") + _command(b"PTTL", prefix + b"b")

    def test_command_ignores_the_prefix(self, core: ModuleType, prefix: bytes) -> None:
        wire = _encode(core, prefix, lambda b: b.append_command(["GET", b"k\xff", -5, 10**30, "é"]))
        assert wire == _command(b"GET", b"k\xff", b"-5", b"1" + b"0" * 30, "é".encode())


@pytest.mark.parametrize(
    "ttl", [0, 1, 9, 10, 99, 100, 12345, -1, -100, 2**63 - 1, -(2**63), 2**64, -(2**70), True, 2.9]
)
def test_ttl_formatting(core: ModuleType, ttl: int) -> None:
    wire = _encode(core, b"", lambda b: b.append_set_nx_px(b"n", b"t", ttl))
    assert wire == _command(b"SET", b"n", b"t", b"NX", b"PX", b"%d" % ttl)


def test_lengths_of_every_width(core: ModuleType) -> None:
    for size in [0, 1, 9, 10, 99, 100, 999, 1000, 10000, 100000]:
        name = b"n" * size
        wire = _encode(core, b"", lambda b, name=name: b.append_pttl(name))
        assert wire == _command(b"PTTL", name)


def test_empty_batches_on_a_fresh_buffer(core: ModuleType) -> None:
    buffer = core.CommandBuffer(b"p:")
    buffer.append_set_nx_px_many([], [], 1)
    buffer.append_evalsha_many(SHA, (), (), 5)
    buffer.append_pttl_many(iter([]))
    assert (len(buffer), buffer.pending, buffer.take()) == (0, 0, b"")


def test_bookkeeping(core: ModuleType) -> None:
    buffer = core.CommandBuffer(b"p:")
    assert buffer.key_prefix == b"p:"
    assert (len(buffer), buffer.pending, buffer.take()) == (0, 0, b"")
    buffer.append_set_nx_px_many([b"a", b"b", b"c"], [b"1", b"2", b"3"], 10)
    buffer.append_pttl(b"a")
    buffer.append_evalsha_multikey(SHA, [b"a", b"b"], [b"1", b"2"])
    assert buffer.pending == 5
    data = buffer.take()
    assert len(data) > 0
    assert (len(buffer), buffer.pending, buffer.take()) == (0, 0, b"")
    buffer.append_pttl(b"x")
    assert len(buffer) == len(_command(b"PTTL", b"p:x"))
    buffer.clear()
    assert (len(buffer), buffer.pending, buffer.take()) == (0, 0, b"")


def test_large_batches_grow_and_reset(core: ModuleType) -> None:
    names = [b"lock:%d" % i for i in range(30000)]
    buffer = core.CommandBuffer()
    for _ in range(2):
        buffer.append_set_nx_px_many(names, names, 1000)
        assert buffer.pending == len(names)
        assert buffer.take() == b"".join(_command(b"SET", n, n, b"NX", b"PX", b"1000") for n in names)


@pytest.mark.parametrize("prefix", ["p:", bytearray(b"p:"), memoryview(b"p:"), None])
def test_key_prefix_must_be_bytes(core: ModuleType, prefix: object) -> None:
    with pytest.raises(TypeError, match=r"^key_prefix must be bytes$"):
        core.CommandBuffer(prefix)


class _Bytes(bytes):
    pass


BAD_CALLS: list[tuple[str, Callable[[Any], None], type[Exception], str]] = [
    ("set-name", lambda b: b.append_set_nx_px("n", b"t", 1), TypeError, "expected bytes, not str"),
    (
        "set-token",
        lambda b: b.append_set_nx_px(b"n", bytearray(b"t"), 1),
        TypeError,
        "expected bytes, not bytearray",
    ),
    (
        "set-subclass",
        lambda b: b.append_set_nx_px(_Bytes(b"n"), b"t", 1),
        TypeError,
        "expected bytes, not _Bytes",
    ),
    ("set-ttl", lambda b: b.append_set_nx_px(b"n", b"t", "1"), TypeError, ""),
    (
        "set-many-middle",
        lambda b: b.append_set_nx_px_many([b"a", b"b", "c", b"d"], [b"1"] * 4, 1),
        TypeError,
        "expected bytes, not str",
    ),
    (
        "set-many-token",
        lambda b: b.append_set_nx_px_many([b"a", b"b"], [b"1", None], 1),
        TypeError,
        "expected bytes, not NoneType",
    ),
    ("set-many-ttl", lambda b: b.append_set_nx_px_many([b"a"], [b"1"], None), TypeError, ""),
    (
        "set-many-lengths",
        lambda b: b.append_set_nx_px_many([b"a", b"b"], [b"1"], 1),
        ValueError,
        "names and tokens differ in length",
    ),
    ("evalsha-sha", lambda b: b.append_evalsha("sha", b"n", b"t"), TypeError, "expected bytes, not str"),
    (
        "evalsha-name",
        lambda b: b.append_evalsha(SHA, memoryview(b"n"), b"t", 5),
        TypeError,
        "expected bytes, not memoryview",
    ),
    (
        "evalsha-many-middle",
        lambda b: b.append_evalsha_many(SHA, [b"a", 1, b"c"], [b"1"] * 3),
        TypeError,
        "expected bytes, not int",
    ),
    (
        "evalsha-many-lengths",
        lambda b: b.append_evalsha_many(SHA, [b"a"], []),
        ValueError,
        "names and tokens differ in length",
    ),
    (
        "multikey-name",
        lambda b: b.append_evalsha_multikey(SHA, [b"a", "b"], [b"1", b"2"]),
        TypeError,
        "expected bytes, not str",
    ),
    (
        "multikey-token",
        lambda b: b.append_evalsha_multikey(SHA, [b"a", b"b"], [b"1", 2], 5),
        TypeError,
        "expected bytes, not int",
    ),
    ("multikey-ttl", lambda b: b.append_evalsha_multikey(SHA, [b"a"], [b"1"], "5"), TypeError, ""),
    (
        "multikey-lengths",
        lambda b: b.append_evalsha_multikey(SHA, [b"a"], [b"1", b"2"]),
        ValueError,
        "names and tokens differ in length",
    ),
    ("pttl", lambda b: b.append_pttl("n"), TypeError, "expected bytes, not str"),
    (
        "pttl-many-last",
        lambda b: b.append_pttl_many([b"a", b"b", 3.0]),
        TypeError,
        "expected bytes, not float",
    ),
    (
        "command-arg",
        lambda b: b.append_command([b"GET", 1.5]),
        TypeError,
        "command argument must be bytes, str or int, not float",
    ),
    (
        "command-bool",
        lambda b: b.append_command([b"GET", True]),
        TypeError,
        "command argument must be bytes, str or int, not bool",
    ),
    ("command-empty", lambda b: b.append_command([]), ValueError, "a command needs at least one argument"),
]


@pytest.mark.parametrize(("name", "call", "error", "message"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_refused_input_leaves_the_buffer_unchanged(
    core: ModuleType, name: str, call: Callable[[Any], None], error: type[Exception], message: str
) -> None:
    buffer = core.CommandBuffer(b"p:")
    buffer.append_pttl(b"before")
    with pytest.raises(error) as raised:
        call(buffer)
    if message:
        assert str(raised.value) == message
    assert buffer.pending == 1
    assert buffer.take() == _command(b"PTTL", b"p:before")
