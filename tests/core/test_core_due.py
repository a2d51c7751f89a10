"""A renewer's wake-up split by the core (``DueReader.split``): the plain renewal states' leases
are sent with their believed expiry read from the slots, exactly what ``Lease.expires_at`` says;
gone and released ones are dropped; every other kind is left to the book's general loop. Both
cores give the same split, and the book's ``take_due`` the same outcome as its general loop
alone. Refcounts stay as they were."""

from __future__ import annotations

import math
import sys
from types import ModuleType
from typing import Any

import pytest
from _search_budget import budget
from hypothesis import given
from hypothesis import strategies as st

from turbolock._flows.redlock_result import InstanceSummary, RedlockLease
from turbolock._flows.renewal_book import PLAIN_LEASES, RenewalState, RenewalTerms
from turbolock.lease import FencedLease, Lease, _Flight

NOW = 1000.0
MARGIN = 0.027
PLAIN_TERMS = RenewalTerms(5.0, None, None)
LIMITED_TERMS = RenewalTerms(5.0, 3, None)
KINDS = ("fresh", "settled", "flying-lower", "flying-higher", "fenced", "several-in-flight", "redlock",
         "limited", "limit-reached", "released", "gone", "too-late", "expiry-not-float", "not-a-state")


def _reader(core: ModuleType) -> Any:
    return core.DueReader(RenewalState, RenewalTerms, PLAIN_LEASES)


def _state(kind: str, i: int, kept: list[object]) -> object:
    """A due state of ``kind``; ``kept`` holds the leases (a state only refers to its weakly)."""
    if kind == "not-a-state":
        return ("not", "a", "state", i)
    if kind == "redlock":
        lease: Lease = RedlockLease(f"n{i}", b"t", 30_000, NOW, None, 0, InstanceSummary(3, 0, 0), None)
    elif kind == "fenced":
        lease = FencedLease(f"n{i}", b"t", 30_000, NOW - i / 10, None, i + 1)
    else:
        lease = Lease(f"n{i}", b"t", 30_000 + i, NOW - i / 10, None)
    if kind == "settled":
        lease._expires = NOW + 7.5 + i
    elif kind == "flying-lower":
        lease._expires, lease._flight = NOW + 20.0, (NOW - 1, NOW + 3.25 + i / 100)
    elif kind == "flying-higher":
        lease._flight = (NOW - 1, NOW + 99.0)
    elif kind == "several-in-flight":
        lease._flight = _Flight([(NOW - 2, NOW + 4.0), (NOW - 1, NOW + 5.0)])
    elif kind == "too-late":
        lease._expires = NOW + MARGIN / 2
    elif kind == "expiry-not-float":
        lease._expires = int(NOW + 9)  # type: ignore[assignment]
    terms = LIMITED_TERMS if kind == "limited" else PLAIN_TERMS
    state = RenewalState(lease, lambda _: None, i, terms, math.inf)
    state.limit_reached = kind == "limit-reached"
    state.released = kind == "released"
    if kind != "gone":
        kept.append(lease)
    return state


def _expected(states: list[object]) -> tuple[list[Lease], float, list[object]]:
    """The split by the rules, read through Python attributes."""
    send, rest = [], []
    for state in states:
        if type(state) is not RenewalState:
            rest.append(state)
            continue
        lease = state()
        if lease is None or state.released:
            continue
        plain = (not state.limit_reached and not state.terms.limited and type(lease) in PLAIN_LEASES
                 and type(lease._expires) in (float, type(None))
                 and (lease._flight is None or type(lease._flight) is tuple))
        if plain and lease.expires_at - MARGIN > NOW:
            send.append(lease)
        else:
            rest.append(state)
    return send, min((lease.expires_at for lease in send), default=math.inf), rest


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_state_is_split_by_the_rules(core: ModuleType, kind: str) -> None:
    kept: list[object] = []
    states = [_state(kind, i, kept) for i in range(3)]
    send, earliest, rest = _reader(core).split(states, NOW, MARGIN)
    expected_send, expected_earliest, expected_rest = _expected(states)
    assert send == expected_send and rest == expected_rest
    assert earliest == expected_earliest
    if kind in ("fresh", "settled", "flying-lower", "flying-higher", "fenced"):
        assert len(send) == 3 and not rest  # the plain ones are what the core exists for


@budget(100)
@given(kinds=st.lists(st.sampled_from(KINDS), max_size=40))
def test_both_cores_split_a_mixed_wake_up_alike(core: ModuleType, kinds: list[str]) -> None:
    kept: list[object] = []
    states = [_state(kind, i, kept) for i, kind in enumerate(kinds)]
    assert _reader(core).split(states, NOW, MARGIN) == _expected(states)


def test_the_split_keeps_refcounts(core: ModuleType) -> None:
    kept: list[object] = []
    states = [_state(kind, i, kept) for i, kind in enumerate(KINDS * 3)]
    before = [sys.getrefcount(item) for item in states + kept]
    reader = _reader(core)
    for _ in range(10):
        send, _, rest = reader.split(states, NOW, MARGIN)
        del send, rest
    assert [sys.getrefcount(item) for item in states + kept] == before


def test_a_reader_refuses_classes_without_the_slots(core: ModuleType) -> None:
    with pytest.raises(TypeError):
        core.DueReader(Lease, RenewalTerms, PLAIN_LEASES)  # not a renewal state
    with pytest.raises(TypeError):
        core.DueReader(RenewalState, RenewalTerms, ())
    with pytest.raises(TypeError):
        core.DueReader(RenewalState, RenewalTerms, (Lease, RedlockLease, str))
    with pytest.raises(TypeError):
        _reader(core).split(tuple(), NOW, MARGIN)


class _Wide:
    __slots__ = tuple(f"s{i}" for i in range(64))


class _BorrowingState(RenewalState):
    """A state whose ``released`` is another class's slot: read by offset, it would lie outside
    the object (the compiled core read past its end: found in review)."""

    __slots__ = ()
    released = _Wide.__dict__["s63"]  # type: ignore[assignment]


class _BorrowingLease(Lease):
    __slots__ = ()
    _expires = _Wide.__dict__["s62"]  # type: ignore[assignment]


class _EqualToEverything(type):
    def __eq__(cls, other: object) -> bool:
        return True

    def __hash__(cls) -> int:
        return id(cls)


class _Impostor(Lease, metaclass=_EqualToEverything):
    __slots__ = ()


def test_a_reader_refuses_another_class_s_slot(core: ModuleType) -> None:
    with pytest.raises(TypeError, match="slot of its own"):
        core.DueReader(_BorrowingState, RenewalTerms, PLAIN_LEASES)
    with pytest.raises(TypeError, match="one slot layout"):
        core.DueReader(RenewalState, RenewalTerms, (Lease, _BorrowingLease))


def test_lease_types_are_matched_by_identity(core: ModuleType) -> None:
    kept: list[object] = []
    impostor = _Impostor("n", b"t", 30_000, NOW, None)
    kept.append(impostor)
    state = RenewalState(impostor, lambda _: None, 1, PLAIN_TERMS, math.inf)
    send, _, rest = _reader(core).split([state], NOW, MARGIN)
    assert send == [] and rest == [state]  # its class compares equal to Lease, yet is not one
