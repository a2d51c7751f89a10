"""A lock's own keys (on Redis Cluster its fence counter; a fair lock's queue) are named twice: in
Python, for the scripts of one lock that declare them (``Script.own_keys``), and in Lua, by a
cluster's claim script (``scripts.SLOT_BASE``). Both must give the same names, or fences drawn by
one kind of call would not follow those drawn by the other. On one server every kind of fenced
acquire draws from the key prefix's one counter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from _fence_paths import fences_by_every_path
from turbolock._wire.scripts import FENCE_SUFFIX, SLOT_BASE, fence_counter
from turbolock._wire.slots import key_slot, slot_base

KEYS = [b"a", b"{a}", b"{a}:b", b"x{a}y", b"{}", b"{}a", b"a{", b"a}", b"}a{b}", b"{a}{b}", b"{{a}}",
        b"{a", b"p:{u:1}:q", b"\xff{\x00}\xfe", b"", b"{" * 3 + b"}" * 3, "ü{é}".encode()]


def test_python_and_lua_name_the_same_own_keys(raw: redis.Redis) -> None:
    lua = SLOT_BASE + b"local out = {}\nfor i = 1, #ARGV do out[i] = slot_base(ARGV[i]) end\nreturn out\n"
    in_lua = raw.eval(lua, 0, *KEYS)
    assert in_lua == [slot_base(key) for key in KEYS]
    for key in KEYS:  # and the names share the key's slot (what they are for)
        if not key or (b"}" in key and slot_base(key) != key):
            continue  # an empty name, a '}' outside a tag: refused by the client (test_fair_lock)
        assert key_slot(slot_base(key) + FENCE_SUFFIX) == key_slot(key), key


@pytest.mark.parametrize("name", ["plain", "{tag}:x"])
def test_every_fenced_path_draws_from_one_counter(make_client: Callable[..., Any], raw: redis.Redis,
                                                  key_prefix: str, name: str) -> None:
    # Single (FENCED_ACQUIRE: the counter declared), bulk (a transaction: FENCES_FOR, declared),
    # claim (CLAIM: the counter in ARGV), Lock and fair Lock (FAIR_ACQUIRE: declared).
    fences = fences_by_every_path(make_client(), name)
    assert fences == list(range(fences[0], fences[0] + len(fences)))
    assert raw.get(fence_counter(key_prefix.encode())) == b"%d" % fences[-1]
    key = (key_prefix + name).encode()
    assert raw.get(slot_base(key) + FENCE_SUFFIX) is None
