"""A slot map groups a bulk call's items by master (``SlotMap.group``, the Cluster client's hot
path): each master's items in input order, the masters in the order they first appear (a claim
walks them so), none lost or doubled, None as soon as one item's slot has no master, and a map
changed by ``MOVED`` groups by the new owner."""

from __future__ import annotations

import random

from turbolock._wire.slot_map import SlotMap
from turbolock._wire.slots import SLOTS

A, B, C = ("10.0.0.1", 7000), ("10.0.0.2", 7001), ("10.0.0.3", 7002)


def _three_masters() -> SlotMap:
    # Equal but distinct tuples per slot, as a map read from a server has.
    return SlotMap([tuple(list((A, B, C)[slot * 3 // SLOTS])) for slot in range(SLOTS)])


def _expected(slot_map: SlotMap, indices: list[int], slots: list[int]) -> dict[tuple[str, int], list[int]]:
    expected: dict[tuple[str, int], list[int]] = {}
    for i, slot in zip(indices, slots, strict=True):
        owner = slot_map.node_of(slot)
        assert owner is not None
        expected.setdefault(owner, []).append(i)
    return expected


def test_items_are_grouped_by_master_in_input_order() -> None:
    slot_map = _three_masters()
    rng = random.Random(7)
    indices = rng.sample(range(50_000), 5_000)  # a subset of a call's items, in its own order
    slots = [rng.randrange(SLOTS) for _ in indices]
    groups = slot_map.group(indices, slots)
    assert groups == _expected(slot_map, indices, slots)
    assert list(groups) == list(_expected(slot_map, indices, slots))  # masters by first appearance
    last_first = slot_map.group([5, 3, 9], [SLOTS - 1, 0, SLOTS - 1])
    assert list(last_first.items()) == [(C, [5, 9]), (A, [3])]
    assert sorted(i for items in groups.values() for i in items) == sorted(indices)
    assert slot_map.group([1, 2], [0, 1]) == {A: [1, 2]}  # a master with no item is left out
    assert slot_map.group([], []) == {}


def test_a_slot_without_a_master_gives_none() -> None:
    owner = [(A if slot < 100 else B) for slot in range(SLOTS)]
    owner[5000] = None
    slot_map = SlotMap(owner)
    assert slot_map.group([0, 1, 2], [1, 200, 300]) == {A: [0], B: [1, 2]}
    assert slot_map.group([0, 1, 2], [1, 5000, 300]) is None


def test_a_moved_slot_is_grouped_by_its_new_master() -> None:
    slot_map = _three_masters()
    assert slot_map.group([0, 1], [0, 20]) == {A: [0, 1]}
    moved = slot_map.moved({20: C})
    assert moved.group([0, 1], [0, 20]) == {A: [0], C: [1]}
    assert slot_map.group([0, 1], [0, 20]) == {A: [0, 1]}  # the old map is unchanged


def test_moved_replies_update_their_slots_in_one_map_and_name_a_new_master() -> None:
    """A pass's MOVED replies go into one new map (a reshard answers hundreds at once); a master
    none of the map's slots named yet (one just added) is listed and grouped; one that lost its
    last slot stays listed, with no items, until the next read of the map."""
    slot_map = _three_masters()
    d = ("10.0.0.4", 7003)
    moved = slot_map.moved({0: d, 20: C, 5000: d})
    assert moved.epoch == slot_map.epoch + 1
    assert [moved.node_of(slot) for slot in (0, 20, 5000, 1)] == [d, C, d, slot_map.node_of(1)]
    assert moved.masters == sorted([A, B, C, d])
    assert moved.group([0, 1, 2, 3], [0, 20, 5000, 1]) == {d: [0, 2], C: [1], slot_map.node_of(1): [3]}
    assert slot_map.masters == sorted([A, B, C]) and slot_map.node_of(0) != d  # the old map is unchanged
