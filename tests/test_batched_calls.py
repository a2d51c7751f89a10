"""The sans-IO half of multi-key script calls (``_flows.bulk_plan``): one reply per lock from
each call's reply, whatever came back; a call that failed whole has its locks given back once;
what a cancelled caller's calls may have taken, read from their orphan tags."""

from __future__ import annotations

from turbolock._flows.bulk_plan import AcquirePlan, expand_calls, join_orphan_tags, orphan_replies
from turbolock._wire import core_py
from turbolock._wire.outcomes import NOT_SENT, UNKNOWN, failures, with_failures
from turbolock._wire.scripts import KEYS_PER_CALL
from turbolock.errors import ReplyError

WRONGTYPE = ReplyError("WRONGTYPE Operation against a key holding the wrong kind of value")
NOSCRIPT = ReplyError("NOSCRIPT No matching script")


def test_each_call_gives_one_reply_per_lock_in_order() -> None:
    replies = expand_calls([[1, None, WRONGTYPE], UNKNOWN, NOSCRIPT, NOT_SENT], [3, 2, 2, 1])
    assert replies == [1, None, WRONGTYPE, UNKNOWN, UNKNOWN, NOSCRIPT, NOSCRIPT, NOT_SENT]


def test_a_list_of_the_wrong_length_is_unknown_never_shifted() -> None:
    assert expand_calls([[1, 2], [3, 4, 5]], [3, 3]) == [UNKNOWN, UNKNOWN, UNKNOWN, 3, 4, 5]


def test_failures_only_replies_name_what_failed_and_the_rest_succeeded() -> None:
    replies = expand_calls([[], [2, 0, 3, WRONGTYPE], UNKNOWN, NOT_SENT], [2, 3, 1, 2], 1)
    assert replies == [1, 1, 1, 0, WRONGTYPE, UNKNOWN, NOT_SENT, NOT_SENT]


def test_a_failures_only_reply_no_redis_would_send_is_unknown_for_its_call_alone() -> None:
    # odd length, out of range (twice), unordered, not an int, repeated
    bad = [[1], [0, 0], [3, 0], [2, 0, 1, 0], [b"1", 0], [1, 0, 1, 0]]
    for reply in bad:
        assert failures(reply, 2) is None, reply
        assert expand_calls([reply, [1, 0]], [2, 2], 1) == [UNKNOWN, UNKNOWN, 0, 1]


def test_failures_round_trip_through_with_failures() -> None:
    outcomes: list[object] = [1, 0, 1, WRONGTYPE, UNKNOWN, 1]
    reply = with_failures(outcomes)
    assert reply == [2, 0, 4, WRONGTYPE, 5, UNKNOWN]
    assert failures(reply, len(outcomes)) == [(1, 0), (3, WRONGTYPE), (4, UNKNOWN)]
    assert with_failures([1, 1]) == [] and failures([], 2) == []


def _plan(count: int) -> tuple[AcquirePlan, list[bytes]]:
    tokens = [b"t%015d" % i for i in range(count)]
    plan = AcquirePlan([f"n{i}" for i in range(count)], 10_000, tokens, object(), core_py, renewed=False)
    given: list[bytes] = []
    plan.give_back = lambda key, token, forget_at: given.append(key)
    return plan, given


def test_a_call_that_failed_whole_gives_its_locks_back_once() -> None:
    plan, given = _plan(KEYS_PER_CALL + 5)
    plan.on_call_replies(0, [[1] * KEYS_PER_CALL, WRONGTYPE])
    assert given == [b"n%d" % i for i in range(KEYS_PER_CALL, KEYS_PER_CALL + 5)]
    plan.expand([[1] * KEYS_PER_CALL, WRONGTYPE])  # the final replies: not given back twice
    assert len(given) == 5


def test_noscript_is_not_a_failure_and_a_short_list_is() -> None:
    plan, given = _plan(KEYS_PER_CALL + 5)
    plan.on_call_replies(0, [NOSCRIPT, [1, 2]])
    assert given == [b"n%d" % i for i in range(KEYS_PER_CALL, KEYS_PER_CALL + 5)]


def test_orphan_replies_of_one_call_and_of_several() -> None:
    one = (["a", "b"], [b"1", b"2"], 100, [2])
    assert orphan_replies(one, [7, None]) == [7, None]
    several = (["a", "b", "c"], [b"1", b"2", b"3"], 100, [2, 1])
    assert orphan_replies(several, [[7, None], WRONGTYPE]) == [7, None, UNKNOWN]  # may have taken c
    assert orphan_replies(several, UNKNOWN) == [UNKNOWN] * 3
    per_key = (["a", "b"], [b"1", b"2"], 100)
    assert orphan_replies(per_key, [b"OK", None]) == [b"OK", None]
    assert orphan_replies((["a"], [b"1"], 100), b"OK") == [b"OK"]


def test_joined_tags_keep_keys_tokens_and_call_sizes_together() -> None:
    joined = join_orphan_tags([(["a", "b"], [b"1", b"2"], 100, [2]), (["c"], [b"3"], 100, [1])])
    assert joined == (["a", "b", "c"], [b"1", b"2", b"3"], 100, [2, 1])
    assert join_orphan_tags([(["a"], [b"1"], 100), (["b"], [b"2"], 100)]) == (["a", "b"], [b"1", b"2"], 100)
