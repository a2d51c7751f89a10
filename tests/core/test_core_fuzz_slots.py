"""key_slots fuzzed: both cores give each key's Redis Cluster slot, and refuse the same input."""

from __future__ import annotations

from binascii import crc_hqx
from types import ModuleType

from _search_budget import budget
from hypothesis import given
from hypothesis import strategies as st

from turbolock._wire import core_py as _core_py


def slot(key: bytes) -> int:
    """Redis Cluster's own rule, written out again: CRC16 of the hash tag (first "{" to the first
    "}" after it, when not empty) or of the whole key, modulo 16384."""
    tag = key
    if b"{" in key:
        rest = key[key.index(b"{") + 1 :]
        if b"}" in rest and rest.index(b"}") > 0:
            tag = rest[: rest.index(b"}")]
    return crc_hqx(tag, 0) % 16384


_key = st.lists(st.sampled_from([b"{", b"}", b"a", b"\x00", b"\xff", b"user:1"]), max_size=8).map(b"".join)


@budget(150)
@given(prefix=st.one_of(_key, st.binary(max_size=8)), keys=st.lists(st.one_of(_key, st.binary()), max_size=8))
def test_slots_match_the_rule(core: ModuleType, prefix: bytes, keys: list[bytes]) -> None:
    assert core.key_slots(prefix, keys) == [slot(prefix + key) for key in keys]


class _Bytes(bytes):
    pass


class _List(list):  # type: ignore[type-arg]
    pass


_bad_arguments = [
    (b"", [bytearray(b"k")]),  # the pure core used to hash these; the compiled one refuses them
    (b"", [b"k", _Bytes(b"k")]),
    (_Bytes(b"p"), [b"k"]),
    (bytearray(b"p"), [b"k"]),
    (b"", (b"k",)),
    (b"", _List([b"k"])),
    (b"", [None]),
    (b"", ["k"]),
    (None, []),
]


def test_both_cores_refuse_the_same_arguments(core_c: ModuleType) -> None:
    for prefix, keys in _bad_arguments:
        for core in (core_c, _core_py):
            try:
                core.key_slots(prefix, keys)
            except TypeError:
                continue
            raise AssertionError(f"{core.IMPLEMENTATION} took {prefix!r}, {keys!r}")
