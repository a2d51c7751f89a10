"""The bulk calls of a single-server client as flows, written once for threads and asyncio:
acquire, claim, release, extend and query thousands of locks per call.

Every input is checked before anything is sent (by the plans of ``bulk_plan`` and ``claim``).
Each flow asks the client's executor for pipelined replies (``Call(client._exec.many, ...)``:
chunks on one connection, run by the thread or awaited by the task) and settles them into
results. A lock is reported acquired only on a reply that says so: names whose replies were
lost, and what an interrupted or cancelled call took, are released with their tokens in the
background and listed in the error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from turbolock import _metrics
from turbolock._flows.bulk_plan import (
    AcquirePlan,
    call_failed,
    call_sizes,
    check_leases,
    encode_unique_names,
    expand_calls,
    extending,
    multikey_encoders,
    pttl_encoder,
    script_encoders,
    settle_extend,
    settle_query,
    settle_release,
)
from turbolock._flows.bulk_result import AcquireManyResult
from turbolock._flows.claim import ClaimPlan, ClaimResult, MaybeHeld, check_claim
from turbolock._flows.client_settings import check_fenced_keys
from turbolock._flows.renewal_book import (
    AutoRenew,
    OnLost,
    check_renewed_ttl,
    extends_unconfirmed,
    renewal_of,
)
from turbolock._flows.steps import Call, Flow, Sleep
from turbolock._wire import scripts as _scripts
from turbolock._wire import set_ifeq
from turbolock._wire.outcomes import GIVE_BACK_FLOOR, NOT_SENT, UNKNOWN, bulk_budget, floored
from turbolock._wire.replies import NOT_RUN
from turbolock._wire.validate import Seconds, check_flag, ttl_ms
from turbolock.errors import (
    AcquireOutcomeUnknownError,
    ClientClosedError,
    ConnectionError,
    InvalidArgumentError,
    LockError,
    OutcomeUnknownError,
    ReplyError,
    UnsentTimeoutError,
)
from turbolock.lease import (
    Lease,
    LockInfo,
    commands_ran,
    keys_of,
    lease_released,
    leases_released,
)


def as_list(leases: Sequence[Lease]) -> list[Lease]:
    """``leases`` as a list (sliced below: a deque or another Sequence may not slice)."""
    return leases if type(leases) is list else list(leases)


def _forget(client: Any, leases: Sequence[Lease]) -> None:
    """Leave ``leases`` to the client's background cleanup: released with their tokens soon."""
    now = time.monotonic()
    for lease in leases:
        client._remember_cleanup(lease.key, lease.token, now + lease.ttl_ms / 1000.0)


def _give_back(client: Any, locks: list[MaybeHeld], own_tokens: bool = False) -> None:
    """Release ``locks`` in the background; ``own_tokens``: tokens the client made (see
    ``_acquire_lost``)."""
    for _, key, token, forget_at in locks:
        client._remember_cleanup(key, token, forget_at, own_tokens)


def _roll_back(client: Any, leases: list[Lease], plan: AcquirePlan) -> Flow[None]:
    """Release what an acquire that failed took (not a release the caller made: not reported),
    within what is left of the acquire's budget (a timeout a chunk; ``GIVE_BACK_FLOOR`` to send
    it in). Unanswered by then, interrupted, cancelled or failed part-way, every one is left to
    the background cleanup; one whose release got no answer is retried there (``settle_release``)."""
    ends = plan.sent_at + bulk_budget(client.options.timeout, plan.count, client.chunk_size)
    try:
        replies = yield from run_release_flow(client, keys_of(leases, client.core),
                                              [lease.token for lease in leases],
                                              floored(ends, GIVE_BACK_FLOOR))
    except Exception:  # the acquire's own outcome is known: its give-back goes on in the background
        _forget(client, leases)
        return
    except BaseException:
        _forget(client, leases)
        raise
    try:
        settle_release(client, leases, replies)
    except OutcomeUnknownError:
        pass  # the acquire's own outcome is known; its give-back goes on in the background


def acquire_or_claim_flow(client: Any, names: Sequence[str | bytes], ttl: Seconds, all_or_nothing: bool,
                          tokens: Sequence[bytes] | None, auto_renew: bool | AutoRenew,
                          on_lost: OnLost | None, limit: int | None,
                          fenced: bool = False) -> Flow[AcquireManyResult]:
    """``acquire_many``: every name once, or (with ``limit``) a claim; the leases taken renewed
    when asked."""
    client._refuse_if_closed()  # even with no names: a use after close shows whatever the input
    check_flag(all_or_nothing, "all_or_nothing")
    policy = client._renew_policy(auto_renew, on_lost, ttl_ms(ttl))
    try:
        if limit is None:
            renewed = policy is not None
            result: AcquireManyResult = yield from acquire_many_flow(client, names, ttl, all_or_nothing,
                                                                     tokens, fenced, renewed)
        else:
            check_claim(limit, all_or_nothing)
            if client.options.replicas_ack:
                raise InvalidArgumentError("limit", "claims do not wait for replicas; with replicas_ack, "
                                                    "acquire the names without limit")
            started = time.monotonic() if _metrics.sink is not None else 0.0  # timed only when reported
            result = yield from client._claim_many_flow(names, ttl, limit, tokens, fenced)
            sink = _metrics.sink
            if sink is not None:
                sink.acquired(len(result.acquired), len(result.not_acquired), _metrics.since(started),
                              "acquire_many")
    except AcquireOutcomeUnknownError as error:
        if policy is not None and error.acquired:  # handed over held: renewed as asked
            try:
                client._renewer().add(error.acquired, policy, on_lost)
            except ClientClosedError:  # closed meanwhile: the error still hands them over
                pass
        raise
    if policy is not None:
        client._renewer().add(result.acquired, policy, on_lost)
    return result


def acquire_many_flow(client: Any, names: Sequence[str | bytes], ttl: Seconds, all_or_nothing: bool,
                      tokens: Sequence[bytes] | None = None, fenced: bool = False,
                      renewed: bool = True) -> Flow[AcquireManyResult]:
    plan = AcquirePlan(names, ttl_ms(ttl), tokens, client._owner, client.core, renewed)
    if fenced is not False:
        plan.fence(client._fenced_acquire, client.key_prefix, client.options.replicas_ack, fenced)

    options: dict[str, Any] = {"on_replies": plan.on_replies, "orphans": plan.orphans, "keys": plan.keys}
    if client.options.replicas_ack:
        options["durable"] = True
    batched = plan.script is not None and client._batches_keys
    if batched:  # one server: one transaction per KEYS_PER_CALL fenced locks (fenced refuses replicas_ack)
        plan.give_back = client._remember_cleanup
        call = Call(client._many_batched, (plan.batched_calls(), plan.encode_calls, None, None),
                    {"on_replies": plan.on_call_replies, "orphans": plan.call_orphans,
                     "shape": plan.call_shape()})
    else:
        call = Call(client._exec.many, (plan.count, plan.encode, plan.script, plan.encode_indices), options)
    plan.sent_at = time.monotonic()
    try:
        replies = yield call
    except BaseException:
        _forget(client, plan.taken())  # the leases taken so far will never reach the caller
        raise
    if batched:
        replies = plan.expand(replies)
    if plan.reloaded:
        plan.settle_reloaded(replies)
    if "durable" in options:
        _give_back(client, plan.undurable(replies))
    if plan.unanswered_from() < plan.count:
        acquired = plan.taken()
        if all_or_nothing and not client._closed:  # closed: nothing would release them, so handed over
            _forget(client, acquired)
            acquired = []
        cause = ConnectionError("the connection failed mid-batch")
        error = client._acquire_lost(plan.maybe_held(replies), cause, plan.fresh_tokens)
        if isinstance(error, AcquireOutcomeUnknownError):
            error.acquired = acquired
            error.not_sent = plan.not_sent(replies)
        sink = _metrics.sink
        if sink is not None:  # the locks handed over in the error are granted all the same
            sink.acquired(len(acquired), len(plan.not_acquired), None, "acquire_many")
        raise error
    if plan.errors:
        taken = plan.taken()
        if taken:
            yield from _roll_back(client, taken, plan)
        raise plan.first_error(replies)
    if all_or_nothing and (plan.not_acquired or plan.not_durable):
        yield from _roll_back(client, plan.taken(), plan)
        result = AcquireManyResult(plan.names, [None] * plan.count, plan.not_acquired, plan.not_durable)
    else:
        result = AcquireManyResult(plan.names, plan.leases, plan.not_acquired, plan.not_durable)
    sink = _metrics.sink
    if sink is not None:
        sink.acquired(len(result.acquired), len(plan.not_acquired), time.monotonic() - plan.sent_at,
                      "acquire_many")
    return result


CLAIM_LOST = "the connection failed mid-claim"
"""Why a claim's chunk has no reply (an ``AcquireOutcomeUnknownError``'s cause)."""


def claim_many_flow(client: Any, names: Sequence[str | bytes], ttl: Seconds, limit: int,
                    tokens: Sequence[bytes] | None = None, fenced: bool = False) -> Flow[ClaimResult]:
    """At most ``limit`` free locks, one round trip per chunk. A claim that fails part-way leaves
    the caller nothing: what it took, and what a chunk whose reply was lost may have taken, is
    released in the background; a lost reply raises ``AcquireOutcomeUnknownError`` naming every
    lock the call may hold. ``fenced``: each lock taken comes with its fence."""
    plan = ClaimPlan(names, ttl_ms(ttl), limit, tokens, client._owner, client.chunk_size, core=client.core)
    plan.fenced = check_fenced_keys(fenced, client.key_prefix, plan.keys, 0)
    return (yield from claim_plan_flow(client, plan, client._exec.many))


def claim_plan_flow(client: Any, plan: ClaimPlan, many: Any, deadline: float = math.inf) -> Flow[ClaimResult]:
    """Run ``plan``'s chunks through ``many`` (a ``Server``'s) until it is finished; a chunk
    the server refused before it ran (``plan.resend_pause``) is sent again after the pause.
    Nothing waits past ``deadline`` (a cluster claim's budget) besides each chunk's timeout."""
    options: dict[str, Any] = {} if deadline == math.inf else {"deadline": deadline}
    pause = None
    while not plan.finished:
        if pause is None:
            plan.next_chunk()
        else:
            try:
                yield Sleep(pause)
            except BaseException:  # the refused chunk took nothing; what the claim took goes back
                _give_back(client, plan.held(time.monotonic()))
                raise
        plan.sent_at = time.monotonic()
        try:
            reply = (yield Call(many, (1, plan.encode, plan.script, plan.reencode), options))[0]
        except UnsentTimeoutError:
            _give_back(client, plan.held(time.monotonic()))  # nothing of this chunk ran
            if pause is None:
                raise
            raise plan.error(reply) from None  # a resend past the deadline: the refusal stands
        except Exception:
            _give_back(client, plan.held(time.monotonic()))  # raised before the chunk ran
            raise
        except BaseException:  # interrupted or cancelled: nobody reads the chunk's reply
            now = time.monotonic()
            _give_back(client, plan.held(now) + plan.maybe_held(now), plan.tokens is None)
            raise
        if reply is UNKNOWN:
            now = time.monotonic()
            error = client._acquire_lost(plan.held(now) + plan.maybe_held(now), ConnectionError(CLAIM_LOST),
                                         plan.tokens is None)
            if isinstance(error, AcquireOutcomeUnknownError):
                error.not_sent = plan.not_sent(chunk_sent=True)
            raise error
        if reply is NOT_SENT:
            _give_back(client, plan.held(time.monotonic()))
            raise ConnectionError("the connection failed before the claim was sent")
        pause = plan.resend_pause(reply)
        if pause is not None:
            continue
        if not plan.settle(reply):  # an error reply, or one it cannot read: it may have taken any
            now = time.monotonic()
            _give_back(client, plan.held(now) + ([] if plan.ran_none(reply) else plan.maybe_held(now)))
            raise plan.error(reply)
    return plan.result()


def run_release_flow(client: Any, keys: list[bytes], tokens: list[bytes], deadline: float = math.inf,
                     on_replies: Any = None) -> Flow[list[object]]:
    """Release by key and token, pipelined; the raw replies (released: 1, or 1 + the subscribers
    told; 0, errors, UNKNOWN, NOT_SENT), one per key. One server: one RELEASE_MANY call per
    KEYS_PER_CALL keys."""
    options: dict[str, Any] = {}
    if deadline != math.inf:  # only the threaded client's close and cleaner set one
        options["deadline"] = deadline
    if not client._batches_keys:
        encode, reencode = script_encoders(_scripts.RELEASE, keys, tokens, None)
        step = Call(client._exec.many, (len(keys), encode, _scripts.RELEASE, reencode),
                    {**options, "on_replies": on_replies, "keys": keys})
        replies: list[object] = yield step
        return replies
    sizes = call_sizes(len(keys))
    if on_replies is not None:
        def on_calls(start: int, got: list[object]) -> None:
            first = start * _scripts.KEYS_PER_CALL
            on_replies(first, expand_calls(got, sizes[start:start + len(got)], 1))

        options["on_replies"] = on_calls
    encode, reencode = multikey_encoders(_scripts.RELEASE_MANY, keys, tokens, None)
    step = Call(client._many_batched, (len(sizes), encode, _scripts.RELEASE_MANY, reencode), options)
    calls: list[object] = yield step
    # A call that failed whole may have released some of its locks: each one's outcome is unknown
    # (released again in the background), never "not ours"; one refused before it ran released
    # none, and its error stands.
    return expand_calls([UNKNOWN if call_failed(reply) and reply.code not in NOT_RUN  # type: ignore[attr-defined]
                         else reply for reply in calls], sizes, 1)


def release_many_flow(client: Any, leases: Sequence[Lease], deadline: float = math.inf) -> Flow[list[bool]]:
    client._refuse_if_closed()  # close() releases its renewed locks through here before it is closed
    keys, tokens = check_leases(client, leases)
    leases = as_list(leases)
    if any(map(renewal_of, leases)):  # a C-level pass: a lease's RenewalState is never falsy
        client._renewer().remove([lease for lease in leases if lease.renewal is not None])
    replied = [0]  # chunks come back in order: leases before this one have their answers
    apart: set[int] = set()  # answered beyond ``replied`` (a Redis Cluster's, handed item by item)
    retried = [False]

    def on_replies(start: int, replies: list[object]) -> None:
        # Those answered NOSCRIPT are sent again: from the first of them on, nothing is settled
        # until the retry's replies come, so a cancel meanwhile leaves them to the cleanup.
        if retried[0]:
            return
        if ReplyError in set(map(type, replies)) and _noscript(start, replies):  # a C-level pass first
            return
        if start == replied[0]:
            replied[0] = start + len(replies)
        else:
            apart.update(range(start, start + len(replies)))

    def _noscript(start: int, replies: list[object]) -> bool:
        for j, reply in enumerate(replies):
            if type(reply) is ReplyError and reply.code == "NOSCRIPT":
                replied[0], retried[0] = start + j, True
                return True
        return False

    started = time.monotonic() if _metrics.sink is not None else 0.0  # timed only when reported
    try:
        replies = yield from run_release_flow(client, keys, tokens, deadline, on_replies)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # interrupted or cancelled: what got no answer is retried
            first = replied[0]
            _forget(client, [lease for i, lease in enumerate(leases[first:], first) if i not in apart])
        raise
    try:
        released = settle_release(client, leases, replies)
    except LockError as error:  # the answered ones happened all the same: their leases say so
        for lease, reply in zip(leases, replies, strict=True):
            if type(reply) is int:
                lease_released(lease, reply >= 1)
        sink = _metrics.sink
        if sink is not None and isinstance(error, OutcomeUnknownError):
            sink.released(*_answered(replies), None, "release_many")
        raise
    leases_released(client.core, leases, released)
    sink = _metrics.sink
    if sink is not None:
        done = sum(released)
        sink.released(done, len(released) - done, _metrics.since(started), "release_many")
    return released


def _answered(replies: list[object]) -> tuple[int, int]:
    """(done, refused) among the answered items of a bulk release or extend that raised for the
    others: those happened all the same (an answer is how many locks it released or extended, 0
    when the lock was not ours)."""
    answered = [reply for reply in replies if type(reply) is int]
    done = sum(1 for reply in answered if reply)
    return done, len(answered) - done


def extend_many_flow(client: Any, leases: Sequence[Lease], ttl: Seconds) -> Flow[list[bool]]:
    client._refuse_if_closed()
    keys, tokens = check_leases(client, leases)
    leases = as_list(leases)
    ms = ttl_ms(ttl)
    check_renewed_ttl(leases, ms)
    sizes = call_sizes(len(keys)) if client._batches_keys else None
    as_set = sizes is not None and client._exec.offers_set_ifeq()
    if as_set:  # one server that has SET ... IFEQ: one per lease, pipelined
        sizes = None
        step = Call(client._exec.many, (len(leases), set_ifeq.encoder(keys, tokens, ms)), {"keys": keys})
    elif sizes is not None:  # one server: one RENEW_MANY call per KEYS_PER_CALL leases, a few per write
        encode, reencode = multikey_encoders(_scripts.RENEW_MANY, keys, tokens, ms)
        early = _ExtendedEarly(client, leases, ms, sizes)
        step = Call(client._many_batched, (len(sizes), encode, _scripts.RENEW_MANY, reencode),
                    {"on_replies": early.on_calls})
    else:
        encode, reencode = script_encoders(_scripts.EXTEND, keys, tokens, ms)
        step = Call(client._exec.many, (len(leases), encode, _scripts.EXTEND, reencode), {"keys": keys})
    sent_at = time.monotonic()
    extending(leases, ms, sent_at)
    if sizes is not None:
        early.sent_at = sent_at
    try:
        replies = yield step
    except BaseException:
        extends_unconfirmed(client, leases, sent_at)  # interrupted or cancelled, perhaps after some were sent
        raise
    done = 0
    if sizes is not None:
        replies = expand_calls(replies, sizes, 1)
        done = early.done
    elif as_set:
        replies = set_ifeq.as_script_replies(replies)
    try:
        if done:  # the leading calls settled as they answered
            extended = [True] * done + settle_extend(client, leases[done:], replies[done:], ms, sent_at)
        else:
            extended = settle_extend(client, leases, replies, ms, sent_at)
    except OutcomeUnknownError:
        sink = _metrics.sink
        if sink is not None:
            extended_after, refused = _answered(replies[done:])
            sink.extended(done + extended_after, refused, None, "extend_many")
        raise
    sink = _metrics.sink
    if sink is not None:
        done = sum(extended)
        sink.extended(done, len(extended) - done, time.monotonic() - sent_at, "extend_many")
    return extended


class _ExtendedEarly:
    """Settles the leading calls of a batched ``extend_many`` whose every lease was extended as
    their replies arrive, while the server works on the next ones (``settle_extend`` then has
    only the rest); the first call with anything else stops it."""

    def __init__(self, client: Any, leases: Sequence[Lease], ttl_ms: int, sizes: list[int]) -> None:
        self.client, self.leases, self.ttl_ms, self.sizes = client, leases, ttl_ms, sizes
        self.sent_at = 0.0
        self.calls = 0
        self.done = 0
        """Leases settled, all extended: the first ``done``."""

    def on_calls(self, start: int, replies: list[object]) -> None:
        if start != self.calls:  # a call before these was not settled here: nor are these
            return
        for reply in replies:
            if type(reply) is not list or reply:  # [] is a call whose every key was extended
                return
            first, last = self.done, self.done + self.sizes[self.calls]
            extended = self.leases[first:last]
            commands_ran(extended, self.sent_at, self.ttl_ms)
            self.done, self.calls = last, self.calls + 1  # settled: settle_extend leaves them be
            if any(map(renewal_of, extended)):
                renewer = self.client._renewer()
                for lease in extended:
                    if lease.renewal is not None:
                        renewer.rescheduled(lease)


def query_many_flow(client: Any, names: Sequence[str | bytes]) -> Flow[list[LockInfo]]:
    client._refuse_if_closed()
    keys = encode_unique_names(names, client.core)
    # A read: a reply the timeout cut raises TimeoutError, as a single query's does.
    replies = yield Call(client._exec.many, (len(keys), pttl_encoder(keys)),
                         {"keys": keys, "read_only": True})
    return settle_query(names, replies)
