"""TimerWheel on both cores: timing guarantees, cancel and reschedule, big jumps, many ids,
bad arguments, and the compiled wheel against the pure one on random operation sequences."""

from __future__ import annotations

import math
import random
import tracemalloc
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turbolock._wire import core_py as _core_py
from turbolock._wire.wheel_py import _due_tick

TICK = 0.01
SLOTS = 64
# Near time.monotonic() on a machine up for a while: a float there has about 1e-10 s of
# precision, so tick boundaries do not fall on representable times.
T0 = 1e6


def _late_bound(when: float, tick: float) -> float:
    """By this time an id due at ``when`` must have fired: one tick, plus float rounding."""
    return when + tick + 8 * math.ulp(when + tick)


def _tricky_times(base: float, tick: float, count: int) -> list[float]:
    """Times on and around tick boundaries, computed the ways callers compute them."""
    times = []
    for k in range(count):
        for edge in (base + k * tick, (math.floor(base / tick) + k) * tick, base + k / 100 * 0.3):
            times += [edge, math.nextafter(edge, -math.inf), math.nextafter(edge, math.inf)]
    return times


@pytest.mark.parametrize("tick", [TICK, 0.1, 0.001, 1.0, 0.3])
@pytest.mark.parametrize("base", [0.0, 1.0, T0, 123456.789, 1e9])
def test_never_early_never_more_than_a_tick_late(core: ModuleType, tick: float, base: float) -> None:
    for when in _tricky_times(base, tick, 40):
        wheel = core.TimerWheel(tick, SLOTS, when - 1.0)
        wheel.schedule(7, when)
        before = math.nextafter(when, -math.inf)
        assert wheel.advance(before) == [], (when, tick)
        fired = wheel.advance(when)
        if not fired:
            assert wheel.advance(_late_bound(when, tick)) == [7], (when, tick)
        assert 7 not in wheel and len(wheel) == 0


def test_a_time_just_past_a_tick_boundary(core: ModuleType) -> None:
    # Both divide by 0.01 to exactly 100000007.0; a plain ceil(when / tick) fired this id at
    # 1000000.07, a hair before its time.
    when = 1000000.0700000001
    assert when / TICK == 1000000.07 / TICK == 100000007.0 and when > 1000000.07
    wheel = core.TimerWheel(TICK, SLOTS, T0)
    wheel.schedule(1, when)
    assert wheel.advance(1000000.07) == []
    assert wheel.advance(1000000.08) == [1]


def test_many_random_times_against_a_model(core: ModuleType) -> None:
    rng = random.Random(7)
    wheel = core.TimerWheel(TICK, SLOTS, T0)
    whens: dict[int, float] = {}
    now = T0
    next_id = 1
    for _ in range(3000):
        for _ in range(rng.randrange(4)):
            whens[next_id] = now + rng.choice([rng.uniform(-0.05, 2.0), rng.randrange(300) * TICK])
            wheel.schedule(next_id, whens[next_id])
            next_id += 1
        now += rng.choice([rng.uniform(0, 0.03), TICK, 0.0, rng.uniform(0, 1.5)])
        fired = wheel.advance(now)
        for item in fired:
            assert whens[item] <= now
        fired_set = set(fired)
        for item in fired:
            del whens[item]
        late = [item for item, when in whens.items() if _late_bound(when, TICK) <= now]
        assert late == [], (now, [whens[i] for i in late])
        assert len(fired_set) == len(fired)
        assert len(wheel) == len(whens)


def test_fired_ids_are_sorted_by_due_tick_then_id(core: ModuleType) -> None:
    wheel = core.TimerWheel(1.0, 8, 0.0)
    for item, when in [(5, 3.5), (2, 3.2), (9, 1.5), (1, 20.0), (3, 2.0), (4, 0.5), (8, 3.9)]:
        wheel.schedule(item, when)
    # due ticks: 4 -> 1; 3 -> 2; 9 -> 2; 2, 5, 8 -> 4; 1 -> 20 (more than two turns away)
    assert wheel.advance(10.0) == [4, 3, 9, 2, 5, 8]
    assert wheel.advance(19.9) == []
    assert wheel.advance(20.0) == [1]


def test_cancel(core: ModuleType) -> None:
    wheel = core.TimerWheel(TICK, SLOTS, T0)
    wheel.schedule(1, T0 + 0.5)
    wheel.schedule(2, T0 + 0.5)
    assert wheel.cancel(1) is True
    assert wheel.cancel(1) is False
    assert wheel.cancel(3) is False
    assert 1 not in wheel and 2 in wheel and len(wheel) == 1
    assert wheel.advance(T0 + 1) == [2]
    assert wheel.cancel(2) is False


def test_reschedule_replaces(core: ModuleType) -> None:
    wheel = core.TimerWheel(TICK, SLOTS, T0)
    wheel.schedule(1, T0 + 0.5)
    wheel.schedule(1, T0 + 2.0)  # later, in another turn
    assert len(wheel) == 1
    assert wheel.advance(T0 + 1.0) == []
    wheel.schedule(1, T0 + 1.5)  # earlier again
    assert wheel.advance(T0 + 1.49) == []
    assert wheel.advance(T0 + 1.52) == [1]
    assert wheel.advance(T0 + 3.0) == []
    assert len(wheel) == 0


def test_scheduled_in_the_past_fires_at_the_next_advance(core: ModuleType) -> None:
    wheel = core.TimerWheel(TICK, SLOTS, T0)
    wheel.schedule(3, T0 - 5.0)
    wheel.schedule(2, T0 - 1.0)
    wheel.schedule(1, T0 + 0.5)
    assert wheel.advance(T0) == [3, 2]  # no tick has passed, yet both are overdue
    assert wheel.advance(T0 - 10) == []  # a clock going back changes nothing
    wheel.schedule(4, T0 - 0.001)
    assert wheel.advance(T0 - 10) == [4]
    assert wheel.next_due() == pytest.approx(T0 + 0.5)
    assert wheel.advance(T0 + 0.5 + TICK) == [1]


@pytest.mark.parametrize("turns", [0.5, 1, 1.01, 2, 3.7, 1000])
def test_big_jumps(core: ModuleType, turns: float) -> None:
    wheel = core.TimerWheel(TICK, SLOTS, T0)
    rng = random.Random(turns)
    span = SLOTS * TICK * 5
    whens = {item: T0 + rng.uniform(0, span) for item in range(1, 2000)}
    for item, when in whens.items():
        wheel.schedule(item, when)
    now = T0 + turns * SLOTS * TICK
    fired = wheel.advance(now)
    assert all(whens[item] <= now for item in fired)
    assert {item for item, when in whens.items() if _late_bound(when, TICK) <= now} <= set(fired)
    assert fired == sorted(fired, key=lambda item: (_due_tick(whens[item], TICK), item))
    assert len(wheel) == len(whens) - len(fired)
    rest = wheel.advance(T0 + span + 1)
    assert sorted(fired + rest) == sorted(whens)
    assert len(wheel) == 0


def test_many_ids(core: ModuleType) -> None:
    count = 100_000
    wheel = core.TimerWheel(TICK, 1024, T0)
    for item in range(1, count + 1):
        wheel.schedule(item, T0 + (item % 5000) * 0.001)
    assert len(wheel) == count
    for item in range(2, count + 1, 2):
        assert wheel.cancel(item)
    assert len(wheel) == count // 2
    assert all(item in wheel for item in range(1, count + 1, 2))
    assert not any(item in wheel for item in range(2, count + 1, 2))
    for item in range(1, count + 1, 4):  # reschedule a quarter one turn later
        wheel.schedule(item, T0 + 1024 * TICK + (item % 5000) * 0.001)
    fired: list[int] = []
    now = T0
    while len(wheel):
        now += TICK
        fired += wheel.advance(now)
    assert sorted(fired) == list(range(1, count + 1, 2))
    assert fired[: count // 4] == sorted(fired[: count // 4], key=lambda i: ((i % 5000) // 10, i))
    for item in range(1, count + 1):
        assert not wheel.cancel(item)


def test_memory_per_entry(core: ModuleType) -> None:
    count = 100_000
    tracemalloc.start()
    try:
        wheel = core.TimerWheel(TICK, 1024, T0)
        empty = tracemalloc.get_traced_memory()[0]
        for item in range(1, count + 1):
            wheel.schedule(item, T0 + (item % 5000) * 0.001)
        per_entry = (tracemalloc.get_traced_memory()[0] - empty) / count
        for item in range(1, count + 1):
            wheel.cancel(item)
        after_cancel = tracemalloc.get_traced_memory()[0] - empty
    finally:
        tracemalloc.stop()
    if core.IMPLEMENTATION == "c":
        assert per_entry < 64
        assert after_cancel < 200_000  # the pool and table shrank back
    else:
        assert per_entry < 400


def test_len_contains_next_due(core: ModuleType) -> None:
    wheel = core.TimerWheel(TICK, SLOTS, T0)
    assert len(wheel) == 0 and wheel.next_due() is None
    wheel.schedule(5, T0 + 1.0)
    wheel.schedule(6, T0 + 0.25)
    assert len(wheel) == 2
    assert 5 in wheel and 6 in wheel and 7 not in wheel
    for odd in ["5", 5.0, None, 0, -5, 2**64, (5,), [5], b"5"]:
        assert odd not in wheel
        assert wheel.cancel(odd) is False
    assert True not in wheel  # True == 1, which is not scheduled
    assert wheel.next_due() == _due_tick(T0 + 0.25, TICK) * TICK
    assert wheel.tick == TICK


def test_bool_and_int_subclass_ids_are_their_int_value(core: ModuleType) -> None:
    wheel = core.TimerWheel(TICK, SLOTS, T0)
    wheel.schedule(True, T0 + 0.1)
    assert 1 in wheel and True in wheel
    (fired,) = wheel.advance(T0 + 1)
    assert fired == 1 and type(fired) is int


def _error(call: object, *args: object) -> tuple[type[BaseException], str] | None:
    try:
        call(*args)  # type: ignore[operator]
    except Exception as exc:  # any error is compared
        return type(exc), str(exc)
    return None


BAD_INIT = [
    ((0, 8, T0), ValueError, "tick must be a positive, finite number of seconds"),
    ((-0.01, 8, T0), ValueError, "tick must be a positive, finite number of seconds"),
    ((math.nan, 8, T0), ValueError, "tick must be a positive, finite number of seconds"),
    ((math.inf, 8, T0), ValueError, "tick must be a positive, finite number of seconds"),
    (("0.01", 8, T0), TypeError, "must be real number, not str"),
    ((None, 8, T0), TypeError, "must be real number, not NoneType"),
    ((TICK, 0, T0), ValueError, "slots must be a positive power of two"),
    ((TICK, -8, T0), ValueError, "slots must be a positive power of two"),
    ((TICK, 12, T0), ValueError, "slots must be a positive power of two"),
    ((TICK, 2**21, T0), ValueError, "slots must be at most 2**20"),
    ((TICK, 2**80, T0), ValueError, "slots must be at most 2**20"),
    ((TICK, 8.0, T0), TypeError, "'float' object cannot be interpreted as an integer"),
    ((TICK, 8, math.nan), ValueError, "now must be finite and within 2**53 ticks of 0"),
    ((TICK, 8, -math.inf), ValueError, "now must be finite and within 2**53 ticks of 0"),
    ((TICK, 8, 1e300), ValueError, "now must be finite and within 2**53 ticks of 0"),
    ((1e-300, 8, 1.0), ValueError, "now must be finite and within 2**53 ticks of 0"),
    ((TICK, 8, "now"), TypeError, "must be real number, not str"),
    ((TICK, 8, 10**400), OverflowError, "int too large to convert to float"),
]


@pytest.mark.parametrize(("args", "kind", "message"), BAD_INIT)
def test_bad_constructor_arguments(
    core: ModuleType, args: tuple[object, ...], kind: type[Exception], message: str
) -> None:
    assert _error(core.TimerWheel, *args) == (kind, message)


BAD_SCHEDULE = [
    ((0, T0), ValueError, "item_id must be between 1 and 2**63 - 1"),
    ((-1, T0), ValueError, "item_id must be between 1 and 2**63 - 1"),
    ((2**63, T0), ValueError, "item_id must be between 1 and 2**63 - 1"),
    ((False, T0), ValueError, "item_id must be between 1 and 2**63 - 1"),
    (("1", T0), TypeError, "item_id must be an int, not str"),
    ((1.0, T0), TypeError, "item_id must be an int, not float"),
    ((None, math.nan), TypeError, "item_id must be an int, not NoneType"),
    ((1, math.nan), ValueError, "when must be finite and within 2**53 ticks of 0"),
    ((1, math.inf), ValueError, "when must be finite and within 2**53 ticks of 0"),
    ((1, -1e300), ValueError, "when must be finite and within 2**53 ticks of 0"),
    ((1, 2.0**53 * TICK * 1.0001), ValueError, "when must be finite and within 2**53 ticks of 0"),
    ((1, "soon"), TypeError, "must be real number, not str"),
    ((1, None), TypeError, "must be real number, not NoneType"),
]


@pytest.mark.parametrize(("args", "kind", "message"), BAD_SCHEDULE)
def test_bad_schedule_arguments(
    core: ModuleType, args: tuple[object, ...], kind: type[Exception], message: str
) -> None:
    wheel = core.TimerWheel(TICK, SLOTS, T0)
    wheel.schedule(1, T0 + 1)
    assert _error(wheel.schedule, *args) == (kind, message)
    assert len(wheel) == 1 and wheel.advance(T0 + 2) == [1]  # a refused call changes nothing


@pytest.mark.parametrize(
    ("now", "kind", "message"),
    [
        (math.nan, ValueError, "now must be finite and within 2**53 ticks of 0"),
        (math.inf, ValueError, "now must be finite and within 2**53 ticks of 0"),
        ("later", TypeError, "must be real number, not str"),
    ],
)
def test_bad_advance_arguments(core: ModuleType, now: object, kind: type[Exception], message: str) -> None:
    wheel = core.TimerWheel(TICK, SLOTS, T0)
    wheel.schedule(1, T0 - 1)
    assert _error(wheel.advance, now) == (kind, message)
    assert wheel.advance(T0) == [1]


def test_other_number_types(core: ModuleType) -> None:
    from decimal import Decimal
    from fractions import Fraction

    wheel = core.TimerWheel(Fraction(1, 100), 8, 1_000_000)
    wheel.schedule(1, Decimal("1000000.5"))
    wheel.schedule(2, Fraction(2000001, 2))
    wheel.schedule(3, 1_000_001)
    assert wheel.advance(Decimal("1000000.51")) == [1, 2]
    assert wheel.advance(1_000_002) == [3]


# -- the compiled wheel against the pure one ----------------------------------------------------

_TICKS = st.sampled_from([TICK, 0.1, 1.0, 0.3, 0.001])
_SLOTS = st.sampled_from([1, 2, 8, 64])
_BASE = st.sampled_from([0.0, T0, 123.456, 1e9])
_OFFSET = st.one_of(
    st.floats(-2.0, 30.0, allow_nan=False),
    st.integers(-5, 3000).map(lambda k: k * 0.01),
    st.integers(-5, 300).map(lambda k: k * 0.1),
    st.sampled_from([0.0, 0.3, 0.7, 1.0, 2.56, 0.64, 5.12]),
)
_ID = st.integers(1, 40)
# Now and then something a wheel must refuse (or, for cancel and contains, not find).
_ODD_ID = st.sampled_from([0, -1, 2**63, 2**63 - 1, True, 1.0, "1", None])
_ODD_TIME = st.sampled_from([math.nan, math.inf, -math.inf, 1e300, "1", None, 10**400])
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), _ID, _OFFSET, st.booleans()),
        st.tuples(st.just("cancel"), _ID),
        st.tuples(st.just("advance"), _OFFSET, st.booleans()),
        st.tuples(st.just("contains"), _ID),
        st.tuples(st.just("odd-schedule"), st.one_of(_ID, _ODD_ID), st.one_of(_OFFSET, _ODD_TIME)),
        st.tuples(st.just("odd-advance"), _ODD_TIME),
        st.tuples(st.just("odd-cancel"), _ODD_ID),
        st.tuples(st.just("len")),
        st.tuples(st.just("next_due")),
    ),
    max_size=80,
)


def _replay(
    core: ModuleType, tick: float, slots: int, base: float, ops: list[tuple[object, ...]]
) -> list[object]:
    trace: list[object] = []
    wheel = core.TimerWheel(tick, slots, base)
    for op in ops:
        name = op[0]
        if name == "schedule":
            _, item, offset, nudge = op
            when = base + offset  # type: ignore[operator]
            trace.append(wheel.schedule(item, math.nextafter(when, math.inf) if nudge else when))
        elif name == "cancel":
            trace.append(wheel.cancel(op[1]))
        elif name == "advance":
            _, offset, nudge = op
            now = base + offset  # type: ignore[operator]
            trace.append(wheel.advance(math.nextafter(now, -math.inf) if nudge else now))
        elif name == "contains":
            trace.append(op[1] in wheel)
        elif name == "odd-schedule":
            _, item, offset = op
            when = base + offset if isinstance(offset, float) else offset  # type: ignore[operator]
            trace.append(_error(wheel.schedule, item, when))
        elif name == "odd-advance":
            trace.append(_error(wheel.advance, op[1]))
        elif name == "odd-cancel":
            trace.append((wheel.cancel(op[1]), op[1] in wheel))
        elif name == "len":
            trace.append(len(wheel))
        else:
            trace.append(wheel.next_due())
    return trace


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tick=_TICKS, slots=_SLOTS, base=_BASE, ops=_OPS)
def test_wheels_match(
    core_c: ModuleType, tick: float, slots: int, base: float, ops: list[tuple[object, ...]]
) -> None:
    assert _replay(core_c, tick, slots, base, ops) == _replay(_core_py, tick, slots, base, ops)


@settings(max_examples=200, deadline=None)
@given(
    tick=_TICKS,
    base=_BASE,
    whens=st.lists(_OFFSET, min_size=1, max_size=20),
    nows=st.lists(_OFFSET, max_size=20),
)
def test_timing_holds_for_both(
    core_c: ModuleType, tick: float, base: float, whens: list[float], nows: list[float]
) -> None:
    for core in (core_c, _core_py):
        wheel = core.TimerWheel(tick, 8, base)
        pending = {item: base + offset for item, offset in enumerate(whens, 1)}
        for item, when in pending.items():
            wheel.schedule(item, when)
        seen = base
        for now in sorted(base + offset for offset in nows):
            seen = max(seen, now)
            for item in wheel.advance(now):
                # never early; an id scheduled in the wheel's past is due at once
                assert pending.pop(item) <= seen
            assert not [item for item, when in pending.items() if _late_bound(when, tick) <= now]


@pytest.mark.parametrize("seed", range(4))
def test_wheels_match_through_growth_and_shrinking(core_c: ModuleType, seed: int) -> None:
    """Thousands of ids, scheduled and cancelled in waves: the compiled wheel's pool and table
    grow, shrink and shift entries around, and must still agree with the pure wheel."""
    rng = random.Random(seed)
    wheels = [core.TimerWheel(TICK, 128, T0) for core in (core_c, _core_py)]
    now = T0
    id_space = [1, 2**62 + 7, 1 << 40, 3**39]  # bases of id runs, some with many trailing zeros
    for _ in range(40):
        wave = rng.randrange(1, 20000)
        base = rng.choice(id_space)
        step = rng.choice([1, 2, 1024, 1 << 20])
        ids = [base + step * i for i in range(wave)]
        whens = [now + rng.uniform(-0.5, 5.0) for _ in ids]
        for wheel in wheels:
            for item, when in zip(ids, whens, strict=True):
                wheel.schedule(item, when)
        drop = rng.sample(ids, rng.randrange(len(ids) + 1))
        results = [[wheel.cancel(item) for item in drop] for wheel in wheels]
        assert results[0] == results[1]
        now += rng.choice([0.0, TICK, rng.uniform(0, 3.0), 200.0])
        fired = [wheel.advance(now) for wheel in wheels]
        assert fired[0] == fired[1]
        assert len(wheels[0]) == len(wheels[1])
        assert wheels[0].next_due() == wheels[1].next_due()
        sample = rng.sample(ids, min(50, len(ids)))
        assert [item in wheels[0] for item in sample] == [item in wheels[1] for item in sample]
    for wheel in wheels:
        assert len(wheel.advance(now + 1000)) >= 0 and len(wheel) == 0
