"""The compiled core against the pure one on generated input: same results, same errors."""

from __future__ import annotations

from types import ModuleType

from _search_budget import budget
from hypothesis import given
from hypothesis import strategies as st

from turbolock._wire import core_py as _core_py
from turbolock._wire.core_compare import append_outcome, parser_trace
from turbolock.errors import ReplyError

SETTINGS = budget(200)

_line = st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
_leaf = st.one_of(
    _line.map(lambda b: b"+%b\r\n" % b),
    _line.map(lambda b: b"-%b\r\n" % b),
    st.integers(-(2**63), 2**63 - 1).map(lambda i: b":%d\r\n" % i),
    st.binary(max_size=40).map(lambda b: b"$%d\r\n%b\r\n" % (len(b), b)),
    st.sampled_from([b"$-1\r\n", b"*-1\r\n", b"*0\r\n"]),
)


def _array(items: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(items) + b"".join(items)


_reply = st.recursive(_leaf, lambda children: st.lists(children, max_size=4).map(_array), max_leaves=12)
# Now and then deeper than MAX_NESTING, which both cores must refuse alike.
_deep = st.tuples(st.integers(5, 10), _reply).map(lambda t: b"*1\r\n" * t[0] + t[1])
# Sometimes repeated past the 16 KiB the compiled core hands hiredis at a time.
_stream = st.tuples(
    st.lists(_reply, min_size=1, max_size=12).map(b"".join),
    st.sampled_from([1, 1, 1, 100]),
    st.one_of(st.just(b""), st.just(b""), _deep),
).map(lambda t: t[0] * t[1] + t[2])


_NOISE = st.sampled_from([bytes([b]) for b in b"0123456789-+*$:\r\n x?\xff\x00\\"])


@st.composite
def _corrupted(draw: st.DrawFn) -> bytes:
    """A valid stream with a few bytes replaced, inserted or deleted."""
    stream = bytearray(draw(_stream))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(stream)))
        edit = draw(st.sampled_from(["replace", "insert", "delete"]))
        if edit == "insert" or at == len(stream):
            stream[at:at] = draw(_NOISE)
        elif edit == "replace":
            stream[at : at + 1] = draw(_NOISE)
        else:
            del stream[at]
    return bytes(stream)


# Number lines of every shape: canonical or not, in range or not, signed or not.
_digits = st.text("0123456789-+ ", max_size=21).map(str.encode)
_number_line = st.one_of(
    st.tuples(st.sampled_from([b":", b"$", b"*"]), _digits).map(lambda t: t[0] + t[1] + b"\r\n"),
    st.integers(-(2**64), 2**64).map(lambda i: b"%s%d\r\n" % (b":$*"[i % 3 : i % 3 + 1], i)),
)
_odd_stream = st.lists(st.one_of(_reply, _number_line), min_size=1, max_size=8).map(b"".join)


@SETTINGS
@given(data=st.data(), stream=_stream, limits=st.lists(st.integers(-1, 3), min_size=1, max_size=4))
def test_replies_match(core_c: ModuleType, data: st.DataObject, stream: bytes, limits: list[int]) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    assert parser_trace(core_c, stream, cuts, limits) == parser_trace(_core_py, stream, cuts, limits)


@SETTINGS
@given(
    data=st.data(),
    stream=st.one_of(_corrupted(), _odd_stream),
    limits=st.lists(st.integers(-1, 3), min_size=1, max_size=4),
)
def test_refusals_match(core_c: ModuleType, data: st.DataObject, stream: bytes, limits: list[int]) -> None:
    """Bytes that are not (quite) RESP2: the same replies, then the same refusal at the same point."""
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    assert parser_trace(core_c, stream, cuts, limits) == parser_trace(_core_py, stream, cuts, limits)


def test_error_replies_are_the_same_type(core_c: ModuleType) -> None:
    parsers = [core.RespParser() for core in (core_c, _core_py)]
    for parser in parsers:
        parser.feed(b"-ERR a\r\n")
    (c_error,), (py_error,) = (parser.get_replies() for parser in parsers)
    assert type(c_error) is type(py_error) is ReplyError
    assert c_error.args == py_error.args == ("ERR a",)


_name = st.binary(max_size=20)
_bad = st.sampled_from(["str", 1, None, bytearray(b"x"), 1.5])
_ttl = st.one_of(st.none(), st.integers(-(2**70), 2**70), st.sampled_from([0, 1, 30000, True, 2.5, "x"]))
_pairs = st.lists(st.tuples(_name, _name), max_size=8)


def _call(
    core: ModuleType, prefix: bytes, method: str, args: tuple[object, ...], before: bool
) -> tuple[object, ...]:
    buffer = core.CommandBuffer(prefix)
    if before:
        buffer.append_pttl(b"before")
    return append_outcome(buffer, method, args), buffer.pending, buffer.take()


def _maybe_spoil(data: st.DataObject, values: list[object]) -> list[object]:
    if values and data.draw(st.booleans()):
        values = list(values)
        values[data.draw(st.integers(0, len(values) - 1))] = data.draw(_bad)
    return values


@SETTINGS
@given(data=st.data(), prefix=_name, pairs=_pairs, ttl=_ttl, sha=_name)
def test_encoding_matches(
    core_c: ModuleType,
    data: st.DataObject,
    prefix: bytes,
    pairs: list[tuple[bytes, bytes]],
    ttl: object,
    sha: bytes,
) -> None:
    names = _maybe_spoil(data, [n for n, _ in pairs])
    tokens = _maybe_spoil(data, [t for _, t in pairs])
    if data.draw(st.booleans()):
        tokens = tokens[1:]
    set_ttl = 1 if ttl is None else ttl
    before = data.draw(st.booleans())
    calls = [
        ("append_set_nx_px_many", (names, tokens, set_ttl)),
        ("append_evalsha_many", (sha, names, tokens, ttl)),
        ("append_evalsha_multikey", (sha, names, tokens, ttl)),
        ("append_pttl_many", (names,)),
        ("append_command", (names,)),
    ]
    if names and tokens:
        calls += [
            ("append_set_nx_px", (names[0], tokens[0], set_ttl)),
            ("append_evalsha", (sha, names[0], tokens[0], ttl)),
            ("append_pttl", (names[0],)),
        ]
    for method, args in calls:
        c_outcome = _call(core_c, prefix, method, args, before)
        assert c_outcome == _call(_core_py, prefix, method, args, before), method
