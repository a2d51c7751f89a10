"""CommandBuffer fuzzed: runs of appends give the same bytes on both cores, and those bytes decode to
the commands asked for; bad input raises the same error on both and leaves the buffer as it was.

The commands are decoded by a strict RESP2 reader of this file's own, not by the cores' parsers.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from _search_budget import budget
from hypothesis import event, given
from hypothesis import strategies as st

from turbolock._wire import core_py as _core_py
from turbolock._wire.core_compare import append_outcome


class Bytes(bytes):
    """A bytes subclass: lock commands refuse it (they take exact bytes), commands take it."""


class OneShot(tuple):  # type: ignore[type-arg]
    """Stands for a generator of its items: each core is handed a fresh one."""


def decode_commands(wire: bytes) -> list[list[bytes]]:
    """Commands as a server reads them: arrays of bulk strings, nothing else, nothing left over."""
    commands = []
    pos = 0

    def number(kind: bytes) -> int:
        nonlocal pos
        assert wire[pos : pos + 1] == kind, (pos, wire[pos : pos + 20])
        end = wire.index(b"\r\n", pos)
        text = wire[pos + 1 : end]
        value = int(text)
        assert value >= 0 and b"%d" % value == text, text
        pos = end + 2
        return value

    while pos < len(wire):
        args = []
        for _ in range(number(b"*")):
            size = number(b"$")
            args.append(wire[pos : pos + size])
            assert wire[pos + size : pos + size + 2] == b"\r\n"
            pos += size + 2
        assert args, "a command with no arguments"
        commands.append(args)
    return commands


def _arg(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int):
        return b"%d" % value
    assert isinstance(value, bytes)
    return bytes(value)


def expected(prefix: bytes, method: str, args: Sequence[object]) -> list[list[bytes]]:
    """The commands a successful append stands for."""
    if method == "append_command":
        return [[_arg(a) for a in args[0]]]  # type: ignore[attr-defined]
    if method == "append_pttl":
        return [[b"PTTL", prefix + args[0]]]  # type: ignore[operator]
    if method == "append_pttl_many":
        return [[b"PTTL", prefix + name] for name in args[0]]  # type: ignore[attr-defined]
    if method in ("append_set_nx_px", "append_set_nx_px_many"):
        names, tokens, ttl = args if method.endswith("many") else ([args[0]], [args[1]], args[2])
        return [[b"SET", prefix + n, t, b"NX", b"PX", b"%d" % ttl]  # type: ignore[operator]
                for n, t in zip(names, tokens, strict=True)]  # type: ignore[call-overload]
    sha, *rest = args
    names, tokens, ttl = rest if method != "append_evalsha" else ([rest[0]], [rest[1]], rest[2])
    extra = [] if ttl is None else [b"%d" % ttl]  # type: ignore[str-bytes-safe]
    if method == "append_evalsha_multikey":
        keys = [prefix + n for n in names]  # type: ignore[attr-defined]
        return [[b"EVALSHA", sha, b"%d" % len(keys), *keys, *extra, *tokens]]  # type: ignore[list-item]
    return [[b"EVALSHA", sha, b"1", prefix + n, t, *extra]  # type: ignore[list-item, operator]
            for n, t in zip(names, tokens, strict=True)]  # type: ignore[call-overload]


# Mostly short binary strings, now and then large: past the buffer's first 4 KiB, or past the
# 1 MiB above which take() and clear() hand the buffer back.
_blob = st.one_of(
    st.binary(max_size=24),
    st.binary(max_size=24),
    st.tuples(st.binary(min_size=1, max_size=4), st.sampled_from([5000, (1 << 20) + 1]))
    .map(lambda t: (t[0] * t[1])[: t[1]]),
)
_bad = st.sampled_from(["text", 7, None, True, 1.5, bytearray(b"ba"), memoryview(b"mv"), Bytes(b"sub")])
_maybe_bad = st.one_of(_blob, _blob, _blob, _bad)
_ttl = st.one_of(
    st.integers(1, 30 * 24 * 3600 * 1000),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, True, 2.5, "5", None]),
)
_arg_value = st.one_of(st.binary(max_size=16), st.text(max_size=8), st.integers(), st.just(Bytes(b"s")), _bad)


@st.composite
def _lists(draw: st.DrawFn) -> tuple[object, object]:
    """Names and tokens, usually paired, sometimes not, sometimes as a tuple or a generator."""
    pairs = draw(st.lists(st.tuples(_maybe_bad, _maybe_bad), max_size=6))
    names: Sequence[object] = [n for n, _ in pairs]
    tokens: Sequence[object] = [t for _, t in pairs]
    if draw(st.integers(0, 9)) == 0:
        tokens = [*tokens, b"extra"]
    shape = draw(st.integers(0, 9))
    if shape == 0:
        names = tuple(names)
    elif shape == 1:
        names = OneShot(names)
    return names, tokens


@st.composite
def _append(draw: st.DrawFn) -> tuple[str, tuple[object, ...]]:
    method = draw(st.sampled_from([
        "append_command", "append_set_nx_px", "append_set_nx_px_many", "append_evalsha",
        "append_evalsha_many", "append_evalsha_multikey", "append_pttl", "append_pttl_many",
    ]))
    if method == "append_command":
        return method, (draw(st.lists(_arg_value, max_size=5)),)
    if method == "append_pttl":
        return method, (draw(_maybe_bad),)
    names, tokens = draw(_lists())
    if method == "append_pttl_many":
        return method, (names,)
    ttl = draw(_ttl)
    if method.startswith("append_set"):
        if method == "append_set_nx_px":
            return method, (draw(_maybe_bad), draw(_maybe_bad), ttl)
        return method, (names, tokens, ttl)
    sha = draw(st.one_of(st.binary(min_size=40, max_size=40), _maybe_bad))
    if method == "append_evalsha":
        return method, (sha, draw(_maybe_bad), draw(_maybe_bad), ttl)
    return method, (sha, names, tokens, ttl)


def _fresh(args: tuple[object, ...]) -> tuple[object, ...]:
    """The arguments as a core gets them: each OneShot a new generator."""
    return tuple((item for item in a) if isinstance(a, OneShot) else a for a in args)


def _listed(args: tuple[object, ...]) -> tuple[object, ...]:
    """The arguments with each OneShot as the list of what it yields."""
    return tuple(list(a) if isinstance(a, OneShot) else a for a in args)


@budget(150)
@given(
    prefix=st.one_of(st.binary(max_size=12), st.just(Bytes(b"sub:"))),
    appends=st.lists(_append(), min_size=1, max_size=8),
    takes=st.lists(st.booleans(), min_size=1, max_size=8),
)
def test_appends_match_and_round_trip(
    core_c: ModuleType, prefix: bytes, appends: list[tuple[str, tuple[object, ...]]], takes: list[bool]
) -> None:
    c_buffer, py_buffer = core_c.CommandBuffer(prefix), _core_py.CommandBuffer(prefix)
    wanted: list[list[bytes]] = []
    sent = b""
    for step, (method, args) in enumerate(appends):
        before = c_buffer.pending, len(c_buffer)
        c_outcome = append_outcome(c_buffer, method, _fresh(args))
        assert c_outcome == append_outcome(py_buffer, method, _fresh(args)), method
        event(f"{method}: {'taken' if c_outcome[0] == 'ok' else 'refused'}")
        assert (c_buffer.pending, len(c_buffer)) == (py_buffer.pending, len(py_buffer))
        if c_outcome[0] == "ok":
            wanted += expected(bytes(prefix), method, _listed(args))
        else:
            assert (c_buffer.pending, len(c_buffer)) == before, "a refused append wrote"
        if takes[step % len(takes)]:
            wire = c_buffer.take()
            assert wire == py_buffer.take()
            assert c_buffer.pending == len(c_buffer) == 0
            sent += wire
    sent += c_buffer.take()
    assert decode_commands(sent) == wanted


def test_the_decoder_refuses_what_a_server_would() -> None:
    # Negative controls for decode_commands: each of these must fail to decode.
    for wire in [b"*1\r\n$2\r\nabc\r\n", b"*2\r\n$1\r\na\r\n", b"+OK\r\n", b"*0\r\n", b"*1\r\n$01\r\na\r\n"]:
        try:
            decode_commands(wire)
        except (AssertionError, ValueError, IndexError):
            continue
        raise AssertionError(f"decoded {wire!r}")
