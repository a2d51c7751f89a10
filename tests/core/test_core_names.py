"""The cores' ``names_as_keys``: a bulk call's names checked and encoded in one pass. A list it
returns must be exactly what checking each name (``encode_name``) gives; None sends the caller to
those checks, and is wrong only when every name was fine and of a plain type (str, bytes; the
pure core may also decline a list mixing the two)."""

from __future__ import annotations

import ctypes
import gc
import sys
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turbolock._wire.validate import MAX_NAME_BYTES, encode_name, encode_names
from turbolock.errors import InvalidArgumentError


class Name(str):
    pass


class Raw(bytes):
    pass


names = st.one_of(
    st.text(max_size=6),
    st.text(alphabet=st.characters(codec="ascii"), min_size=1, max_size=6),
    st.binary(max_size=6),
    st.text(alphabet="\ud800\udfff\u00e9a", min_size=1, max_size=3),  # lone surrogates: no UTF-8
    st.builds(Name, st.text(min_size=1, max_size=3)),
    st.builds(Raw, st.binary(min_size=1, max_size=3)),
    st.integers(0, 3),
)


def _checked(items: list[object], max_bytes: int) -> list[bytes] | None:
    """What checking each name gives, or None when one is refused."""
    keys = []
    for item in items:
        try:
            key = encode_name(item)
        except (InvalidArgumentError, TypeError):
            return None
        if len(key) > max_bytes:
            return None
        keys.append(key)
    return keys


@given(items=st.lists(names, max_size=12), max_bytes=st.sampled_from([1, 4, MAX_NAME_BYTES]))
def test_keys_are_what_each_name_check_gives(core: ModuleType, items: list[object], max_bytes: int) -> None:
    keys = core.names_as_keys(items, max_bytes)
    expected = _checked(items, max_bytes)
    if keys is not None:
        assert keys == expected and all(type(key) is bytes for key in keys)
        # One type: distinct names are distinct keys.
        assert {type(item) for item in items} in ({str}, {bytes}, set())
        return
    plain = {type(item) for item in items} <= {str, bytes}
    mixed = {type(item) for item in items} == {str, bytes}
    assert expected is None or not plain or mixed, "declined good names"


@pytest.mark.parametrize("items", [["a", b"b"], [b"a", "a"], ["x", "y", b"a"]],
                         ids=["str-first", "same", "late"])
def test_str_and_bytes_mixed_are_declined_by_both_cores(core: ModuleType, items: list[object]) -> None:
    """The callers then check each name and look for the same key twice among the keys (``a`` and
    ``b"a"`` are one lock), not among the names."""
    assert core.names_as_keys(items, MAX_NAME_BYTES) is None
    assert encode_names(items, "names", core) == ([item if type(item) is bytes else item.encode()
                                                   for item in items], False)


def test_the_first_bad_name_is_named_alike(core: ModuleType) -> None:
    for bad, message in (("", "must not be empty"), ("x" * 1025, "1025 bytes long"),
                         ("\ud800", "cannot be encoded"), (7, "must be str or bytes")):
        with pytest.raises((InvalidArgumentError, TypeError), match=message):
            encode_names(["fine", bad, "also"], "names", core)


def test_ascii_names_get_no_cached_copy_and_every_reference_is_counted(core: ModuleType) -> None:
    items = [f"name:{i}" for i in range(100)] + ["é-accented"]
    sizes = [sys.getsizeof(item) for item in items]
    counts = [sys.getrefcount(item) for item in items]
    keys = core.names_as_keys(tuple(items), MAX_NAME_BYTES)
    assert keys == [item.encode() for item in items]
    assert [sys.getsizeof(item) for item in items] == sizes, "no UTF-8 copy kept on a caller's str"
    assert [sys.getrefcount(item) for item in items] == counts
    control = "é-" + str(len(items))  # a string the test's own code made
    before = sys.getsizeof(control)
    ctypes.pythonapi.PyUnicode_AsUTF8.restype = ctypes.c_char_p
    ctypes.pythonapi.PyUnicode_AsUTF8(ctypes.py_object(control))
    assert sys.getsizeof(control) > before, "the size check sees a cached UTF-8 copy"
    raw = [b"k%d" % i for i in range(50)]
    raw_counts = [sys.getrefcount(item) for item in raw]
    same = core.names_as_keys(raw, MAX_NAME_BYTES)
    assert same is not None and all(a is b for a, b in zip(same, raw, strict=True)), "bytes taken as they are"
    assert [sys.getrefcount(item) for item in raw] == [count + 1 for count in raw_counts]
    del same
    declined = core.names_as_keys([*raw[:10], ""], MAX_NAME_BYTES)  # refused part-way
    assert declined is None
    gc.collect()
    assert [sys.getrefcount(item) for item in raw] == raw_counts, "a list given up on lets go of its keys"


@pytest.mark.parametrize("items", [[b"a", b"b"], ["a", "b"]], ids=["bytes", "str"])
def test_names_read_once_from_an_iterator_as_from_a_list(core: ModuleType, items: list[object]) -> None:
    # The pure core read an iterator twice (its types, then its names) and failed on the second.
    assert core.names_as_keys(iter(items), MAX_NAME_BYTES) == [b"a", b"b"]
