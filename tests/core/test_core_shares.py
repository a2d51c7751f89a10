"""A Redis Cluster call's items split by master and put back in order (``group_items``,
``take_items``, ``put_items``): both cores give what the plain Python loops give, refuse the
same bad input with the same error, and a refused ``put_items`` writes nothing."""

from __future__ import annotations

import sys
from types import ModuleType

import pytest
from _search_budget import budget
from hypothesis import given
from hypothesis import strategies as st

_indices = st.lists(st.integers(0, 19), max_size=30)


@budget(100)
@given(numbers=st.lists(st.integers(0, 3), min_size=20, max_size=20), picks=st.lists(st.integers(0, 19),
                                                                                    max_size=30))
def test_group_items_puts_each_item_in_its_number_s_list(core: ModuleType, numbers: list[int],
                                                         picks: list[int]) -> None:
    indices = [1000 + j for j in range(len(picks))]
    expected: list[list[int]] = [[] for _ in range(4)]
    for i, slot in zip(indices, picks, strict=True):
        expected[numbers[slot]].append(i)
    assert core.group_items(numbers, indices, picks, 4) == expected


@budget(100)
@given(indices=_indices)
def test_take_and_put_items_match_the_loops(core: ModuleType, indices: list[int]) -> None:
    source = [f"item{i}" for i in range(20)]
    assert core.take_items(source, indices) == [source[i] for i in indices]
    target: list[object] = list(range(20))
    values = [object() for _ in indices]
    expected = list(target)
    for i, value in zip(indices, values, strict=True):
        expected[i] = value
    core.put_items(target, indices, values)
    assert target == expected


def test_put_items_keeps_references_right(core: ModuleType) -> None:
    value, old = object(), object()
    target = [old, old]
    before_value, before_old = sys.getrefcount(value), sys.getrefcount(old)
    core.put_items(target, [0, 1, 0], [value, value, value])
    assert target == [value, value]
    assert sys.getrefcount(value) == before_value + 2
    assert sys.getrefcount(old) == before_old - 2
    taken = core.take_items(target, [1, 1, 0])
    assert sys.getrefcount(value) == before_value + 5
    del taken, target
    assert sys.getrefcount(value) == before_value


@pytest.mark.parametrize(("call", "error"), [
    (lambda core: core.take_items(["a"], [1]), IndexError),
    (lambda core: core.take_items(["a"], [-1]), IndexError),
    (lambda core: core.take_items(("a",), [0]), TypeError),
    (lambda core: core.take_items(["a"], ["0"]), TypeError),
    (lambda core: core.put_items([0, 0], [0], [1, 2]), ValueError),
    (lambda core: core.put_items((0,), [0], [1]), TypeError),
    (lambda core: core.group_items([0, 5], [1], [1], 3), ValueError),
    (lambda core: core.group_items([0, 1], [1, 2], [1], 3), ValueError),
    (lambda core: core.group_items([0, 1], [1], [7], 3), IndexError),
    (lambda core: core.group_items([0, 1], [1], [-1], 3), IndexError),
    (lambda core: core.group_items([0, -1], [1], [1], 3), ValueError),
])
def test_bad_input_is_refused_alike(core: ModuleType, call: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        call(core)  # type: ignore[operator]


def test_a_refused_put_writes_nothing(core: ModuleType) -> None:
    target = ["a", "b", "c"]
    with pytest.raises(IndexError):
        core.put_items(target, [0, 1, 3], ["x", "y", "z"])
    assert target == ["a", "b", "c"]
