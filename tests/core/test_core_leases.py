"""The cores' lease makers, ``untrack`` and ``set_slot``: the compiled core writes a lease's slots without
running ``Lease.__init__``; the leases must be the same as ``__init__`` makes, slot by slot, with
every reference counted once (a missing one would free a value still in use, an extra one leak
it), and both cores refuse the same bad calls."""

from __future__ import annotations

import gc
import sys
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turbolock._flows.bulk_plan import lease_maker
from turbolock._wire.validate import encode_name
from turbolock.lease import LEASE_EMPTY, LEASE_VALUES, FencedLease, Lease


def _maker(core: ModuleType) -> object:
    return core.LeaseMaker(Lease, LEASE_VALUES, LEASE_EMPTY)


names = st.one_of(st.text(max_size=20), st.binary(max_size=20))


rows_of = st.tuples(names, st.binary(min_size=16, max_size=40))


@given(rows=st.lists(rows_of, max_size=30),
       ttl=st.integers(1, 2**40), at=st.floats(allow_nan=False, allow_infinity=False))
def test_made_leases_are_those_init_makes(core: ModuleType, rows: list[tuple[object, bytes]], ttl: int,
                                           at: float) -> None:
    columns = tuple(list(column) for column in zip(*rows, strict=True)) if rows else ([], [])
    owner = object()
    out: list[object] = [None] * (len(rows) + 2)
    _maker(core).make(out, 1, columns, 0, len(rows), (ttl, at, owner))
    assert out[0] is None and out[-1] is None
    for i, (name, token) in enumerate(rows):
        made, expected = out[1 + i], Lease(name, token, ttl, at, owner)
        assert type(made) is Lease
        for slot in LEASE_VALUES + LEASE_EMPTY:
            assert getattr(made, slot) == getattr(expected, slot), slot
        assert gc.is_tracked(made)  # untracking is the caller's choice


fenced_rows_of = st.tuples(names, st.binary(min_size=16, max_size=16), st.integers(1, 2**63 - 1))


@given(rows=st.lists(fenced_rows_of, max_size=30), ttl=st.integers(1, 2**40))
def test_made_fenced_leases_are_those_init_makes(core: ModuleType, rows: list[tuple[object, bytes, int]],
                                                 ttl: int) -> None:
    # A fenced bulk acquire's maker: every value a column, the fence last (FencedLease's argument order).
    maker = lease_maker(core, FencedLease)
    owner, at = object(), 1234.5
    columns = ([name for name, _, _ in rows], [token for _, token, _ in rows], [ttl] * len(rows),
               [at] * len(rows), [owner] * len(rows), [fence for _, _, fence in rows])
    out: list[object] = [None] * len(rows)
    maker.make(out, 0, columns, 0, len(rows), ())
    for made, (name, token, fence) in zip(out, rows, strict=True):
        expected = FencedLease(name, token, ttl, at, owner, fence)
        assert type(made) is FencedLease
        for slot in (*LEASE_VALUES, "fence", *LEASE_EMPTY):
            assert getattr(made, slot) == getattr(expected, slot), slot

def test_every_reference_is_counted_once(core: ModuleType) -> None:
    name, token, owner = "refcounted-name", b"t" * 16, object()
    ttl, at = 123_456_789_012, 12345.5
    before = [sys.getrefcount(value) for value in (name, token, owner, ttl, at, None)]
    out: list[object] = [None] * 100
    _maker(core).make(out, 0, ([name] * 100, [token] * 100), 0, 100, (ttl, at, owner))
    held = [sys.getrefcount(value) for value in (name, token, owner, ttl, at)]
    assert held == [count + 100 for count in before[:5]]
    core.untrack(out, 0, 100)
    del out
    gc.collect()
    assert [sys.getrefcount(value) for value in (name, token, owner, ttl, at, None)][:5] == before[:5]


def test_a_part_of_the_columns_goes_to_a_part_of_the_list(core: ModuleType) -> None:
    out: list[object] = [None] * 5
    _maker(core).make(out, 2, (["a", "b", "c", "d"], [b"t" * 16] * 4), 1, 2,
                      (1000, 0.0, None))
    assert out[:2] == [None, None] and out[4] is None
    assert [lease.name for lease in out[2:4]] == ["b", "c"]  # type: ignore[union-attr]


def test_bad_calls_are_refused_alike(core: ModuleType) -> None:
    maker = _maker(core)
    columns = (["a"], [b"t" * 16])
    shared = (1000, 0.0, None)
    huge = sys.maxsize
    bad = ((0, 0, 2, 5), (4, 0, 1, 4), (-1, 0, 1, 5), (0, -1, 1, 5), (0, 0, -1, 5), (2, 0, huge, 5),
           (huge, 0, 1, 5), (0, huge, 1, 5), (0, 1, huge, 5))
    for start, first, count, size in bad:
        with pytest.raises(IndexError):
            maker.make([None] * size, start, columns, first, count, shared)
    with pytest.raises(IndexError):
        maker.make([None] * 5, 0, (["a"], (b"t" * 16,)), 0, 1, shared)
    with pytest.raises(ValueError):
        maker.make([None] * 5, 0, columns, 0, 1, (1000, 0.0))
    with pytest.raises(TypeError):  # FencedLease has a slot more
        core.LeaseMaker(FencedLease, LEASE_VALUES, LEASE_EMPTY)
    with pytest.raises(TypeError):
        core.LeaseMaker(Lease, LEASE_VALUES, LEASE_EMPTY[:-1])

    class WithDict:
        pass

    with pytest.raises(TypeError):
        core.LeaseMaker(WithDict, (), ())


def test_track_undoes_untrack_on_the_c_core(core: ModuleType) -> None:
    items: list[object] = [Lease("n", b"t" * 16, 1000, 0.0, None)]
    core.untrack(items, 0, 1)
    assert gc.is_tracked(items[0]) == (core.IMPLEMENTATION == "py")
    core.track(items[0])
    core.track(items[0])  # already tracked: nothing happens
    core.track(b"not a container")  # not a type the collector tracks: nothing happens
    assert gc.is_tracked(items[0])


def test_set_slot_writes_every_lease_or_none(core: ModuleType) -> None:
    """A bulk release marks its leases in one pass; each value counted once per lease, and a
    list with a stranger in it refused before anything is written."""
    leases: list[object] = [Lease(f"n{i}", b"t" * 16, 1000, 0.0, None) for i in range(3)]
    value = float("-inf")
    before = sys.getrefcount(value)
    core.set_slot(leases, Lease.__dict__["_expires"], value)
    assert [lease._expires for lease in leases] == [value] * 3  # type: ignore[attr-defined]
    assert sys.getrefcount(value) == before + 3
    core.set_slot(leases, Lease.__dict__["_expires"], None)  # the old values let go
    assert sys.getrefcount(value) == before
    for bad in ([leases[0], object()], (leases[0],)):
        with pytest.raises(TypeError):
            core.set_slot(bad, Lease.__dict__["_expires"], 1.0)
    assert leases[0]._expires is None  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        core.set_slot(leases, "_expires", 1.0)


def test_untrack_checks_its_range_alike(core: ModuleType) -> None:
    items: list[object] = [object(), None]
    core.untrack(items, 0, 2)
    core.untrack(items, 1, 1)
    for start, stop in ((0, 3), (-1, 1), (2, 1)):
        with pytest.raises(IndexError):
            core.untrack(items, start, stop)
    with pytest.raises(TypeError):
        core.untrack((1, 2), 0, 1)


lease_rows = st.tuples(
    st.one_of(st.text(max_size=4), st.binary(max_size=4), st.integers(0, 2)),
    st.sampled_from(["mine", "theirs", "unset"]),
    st.sampled_from([Lease, FencedLease]),
)


@given(rows=st.lists(lease_rows, max_size=10))
def test_columns_are_each_lease_key_and_token_or_declined(core: ModuleType,
                                                         rows: list[tuple[object, str, type]]) -> None:
    mine, theirs = object(), object()
    leases: list[object] = []
    for i, (name, whose, cls) in enumerate(rows):
        lease = cls.__new__(cls)
        if whose != "unset":
            lease._name, lease.token = name, b"%016d" % i
            lease.owner = mine if whose == "mine" else theirs
        leases.append(lease)
    columns = _maker(core).columns(leases, mine, 3)
    fine = all(cls is Lease and whose == "mine" and type(name) in (str, bytes) and _fits(name, 3)
               for name, whose, cls in rows)
    if columns is None:
        mixed = {type(name) for name, _, _ in rows} == {str, bytes}
        assert not fine or mixed, "declined fine leases"  # mixed: both cores check them one by one
        return
    assert fine and {type(name) for name, _, _ in rows} in ({str}, {bytes}, set())
    assert columns == ([encode_name(name) for name, _, _ in rows], [b"%016d" % i for i in range(len(rows))])


def _fits(name: object, limit: int) -> bool:
    try:
        return len(encode_name(name)) <= limit
    except ValueError:
        return False


def test_columns_count_every_reference_once(core: ModuleType) -> None:
    owner = object()
    leases = [Lease(b"name-%d" % i, b"t" * 16, 1000, 0.0, owner) for i in range(50)]
    names = [lease.name for lease in leases]
    before = [sys.getrefcount(name) for name in names], sys.getrefcount(leases[0].token)
    columns = _maker(core).columns(leases, owner, 1024)
    assert columns is not None and all(a is b for a, b in zip(columns[0], names, strict=True))
    assert [sys.getrefcount(name) for name in names] == [count + 1 for count in before[0]]
    del columns
    assert _maker(core).columns([*leases[:10], object()], owner, 1024) is None  # declined part-way
    gc.collect()
    assert ([sys.getrefcount(name) for name in names], sys.getrefcount(leases[0].token)) == before


def test_columns_compare_owners_by_identity_alike(core: ModuleType) -> None:
    mine = object()
    lease = Lease("n", b"t" * 16, 1000, 0.0, mine)
    lease.owner = []  # unhashable, and equal to another empty list: neither may count as mine
    assert _maker(core).columns([lease], mine, 1024) is None
    assert _maker(core).columns([lease], [], 1024) is None
