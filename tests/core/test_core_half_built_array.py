"""A reply array still arriving is held by the parser, between two feeds, as a list the garbage
collector tracks: code that walks ``gc.get_objects()`` (objgraph, memory profilers, debuggers;
with the asyncio client, any code that runs between two reads of a long reply) meets it. The
compiled core left its empty slots NULL and such a walk crashed the process (found by review);
its slots now hold None until their elements arrive. Each replaced None is released: None's
reference count is the same after many arrays.
"""

from __future__ import annotations

import gc
import sys
from types import ModuleType

import pytest


@pytest.mark.parametrize("wire, rest, expected", [
    (b"*3\r\n:1\r\n", b":2\r\n$1\r\nx\r\n", [1, 2, b"x"]),
    (b"*2\r\n*2\r\n+a\r\n", b"+b\r\n$-1\r\n", [[b"a", b"b"], None]),
], ids=["flat", "nested"])
def test_a_half_built_array_can_be_walked_and_then_completes(core: ModuleType, wire: bytes, rest: bytes,
                                                             expected: list[object]) -> None:
    parser = core.RespParser()
    parser.feed(wire)
    assert parser.get_replies() == []
    walked = 0
    for obj in gc.get_objects():
        if type(obj) is list:
            walked += len(list(obj))  # what any walker of the collector's objects does
    assert walked > 0
    parser.feed(rest)
    assert parser.get_replies() == [expected]


def test_the_nones_an_array_starts_with_are_released(core: ModuleType) -> None:
    parser = core.RespParser()
    wire = b"*3\r\n:1\r\n*2\r\n$-1\r\n+a\r\n$2\r\nbc\r\n"
    parser.feed(wire)
    assert parser.get_replies() == [[1, [None, b"a"], b"bc"]]
    before = sys.getrefcount(None)
    for _ in range(2000):
        parser.feed(wire)
        parser.get_replies()
    assert abs(sys.getrefcount(None) - before) < 50  # a leak would be 3 or more per array
