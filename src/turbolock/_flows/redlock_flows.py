"""The flows of a Redlock client: acquire (attempts, quorum, release of failed attempts, retries),
release, extend, query and check, and the bulk calls' entry, written once for the threaded and
the asyncio client: generators of steps (see ``steps``), and for the hot path (one attempt, a
release) plain methods on both sides of a single fan-out.

One attempt writes ``SET key token NX PX ttl`` to every master before reading any reply. The
lock counts only with a quorum (N // 2 + 1 masters) and validity left: ``ttl - elapsed -
drift``, with ``elapsed`` measured from before the first write and ``drift = ttl *
drift_factor + 2 ms``. A failed attempt is released at once on every master that granted it
(in the background on those whose reply was lost), then retried after a random delay until the
caller's wait ends, no retry starting that could end past it (and at most ``retry_count``
times, if set). Release is compare-and-delete on every master; extend is
compare-and-pexpire on a majority that still holds the lock, within validity (and sets the key
again where a restarted master lost it; those never make up the majority).
"""

from __future__ import annotations

import math
import random
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from turbolock import _metrics
from turbolock._flows.client_settings import acquire_lost_error, check_fenced
from turbolock._flows.lock_rules import check_wait
from turbolock._flows.redlock_bulk import acquire_many_flow
from turbolock._flows.redlock_claim import claim_many_flow
from turbolock._flows.redlock_result import (
    FencedRedlockLease,
    InstanceSummary,
    MasterFences,
    RedlockLease,
    RedlockManyResult,
    RedlockResult,
    RedlockStatus,
    decide,
)
from turbolock._flows.redlock_rules import (
    CLEANUP_GRACE,
    DEFAULT_NODE_TIMEOUT,
    RETRIED_ON_MASTERS,
    RedlockRules,
    count_int,
    owe_release,
    remember,
)
from turbolock._flows.renewal_book import AutoRenew, OnLost, extends_unconfirmed
from turbolock._flows.single import extend_ms
from turbolock._flows.steps import Call, Flow
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import GIVE_BACK_FLOOR, UNKNOWN, floored
from turbolock._wire.redlock_scripts import EXTEND, EXTENDED, LOST, UNDECIDED, extend_verdict, tally
from turbolock._wire.validate import TOKEN_BYTES, Seconds, check_flag, check_token, encode_name
from turbolock.errors import ClientClosedError, ExtensionLimitError, QuorumError
from turbolock.lease import (
    FREE,
    LockInfo,
    commands_ran,
    commands_sent,
    info_from_pttl,
    lease_released,
)

Attempt = tuple[bytes, bytes, int, float, float, "int | None", "AutoRenew | None", bool]
"""What an attempt needs, checked before anything is sent: (key, token, ttl in ms, drift in ms,
per-node timeout, max_extensions, renewal policy, fenced)."""


class RedlockFlows(RedlockRules):
    # try_acquire and release, the hot path, are plain methods around one fan-out, which each
    # front end makes itself (``_attempting`` -> fan-out -> ``_attempted``; ``_releasing`` ->
    # fan-out -> ``_released``): a flow's generator, driver loop and StopIteration cost a Redlock
    # acquire+release pair 6-7% more instructions. The flows below reuse the same pieces.

    def _attempting(self, name: str | bytes, ttl: Seconds, token: bytes | None, auto_renew: bool | AutoRenew,
                    on_lost: OnLost | None, max_extensions: int | None, fenced: bool = False) -> Attempt:
        key = encode_name(name)
        fenced = fenced is not False and check_fenced(fenced, self.key_prefix, key, 0)
        ms, drift, node_timeout = self._ttl(ttl)
        if token is None:
            token = secrets.token_bytes(TOKEN_BYTES)
        else:
            check_token(token)
        limit = None if max_extensions is None else count_int(max_extensions, "max_extensions", False)
        policy = self._renew_policy(auto_renew, on_lost, ms, node_timeout)
        return key, token, ms, drift, node_timeout, limit, policy, fenced

    @staticmethod
    def _attempt_call(attempt: Attempt) -> tuple[Callable[[Any], None], float, _scripts.Script | None]:
        """The fan-out of an attempt: ``SET NX PX`` on every master, or the fenced acquire
        (each master answers its own counter's next value: see ``FencedRedlockLease``)."""
        key, token, ms, _, node_timeout, _, _, fenced = attempt
        if fenced:
            def encode_fenced(buf: Any) -> None:
                _scripts.FENCED_ACQUIRE.append(buf, key, token, ms)
            return encode_fenced, node_timeout, _scripts.FENCED_ACQUIRE

        def encode(buf: Any) -> None:
            buf.append_set_nx_px(key, token, ms)
        return encode, node_timeout, None

    def _attempted(self, name: str | bytes, attempt: Attempt, started: float, replies: list[object],
                   failures: list[str | None], attempts: int,
                   own_token: bool = False) -> tuple[RedlockResult, list[int]]:
        """One attempt's result from the masters' replies to its ``SET NX``, and the masters
        that granted a failed attempt (to release there now). Where a failed attempt's reply was
        lost, the release is owed: sent in the background when that master answers again, not
        waited for on the caller's time (it just failed to answer within a node timeout), and
        with ``own_token`` (a token this client made for this attempt alone) again a little
        later, should the lost command arrive after that release. A client closed during the
        attempt raises ``AcquireOutcomeUnknownError`` instead: what it may hold expires by its ttl."""
        key, token, ms, drift, _, limit, _, fenced = attempt
        valid = started + (ms - drift) / 1000.0 > time.monotonic()
        acquired = conflicted = errored = 0
        granted: list[int] = []
        unknown: list[int] = []
        for m, reply in enumerate(replies):
            if reply == b"OK" or (fenced and type(reply) is int):
                acquired += 1
                granted.append(m)
            elif reply is None:
                conflicted += 1
            else:
                errored += 1
                if reply is UNKNOWN:
                    unknown.append(m)
        summary = InstanceSummary(acquired, conflicted, errored)
        status = decide(summary, self.quorum, valid)
        sink = _metrics.sink
        if sink is not None:
            won = status is RedlockStatus.ACQUIRED
            sink.acquired(int(won), int(not won and conflicted > 0), time.monotonic() - started,
                          "acquire", name)
        errors = self._master_errors(replies, failures) if errored else ()
        if status is RedlockStatus.ACQUIRED:
            if fenced:
                fences = MasterFences((reply if type(reply) is int else None for reply in replies),
                                      self.master_names)
                lease: RedlockLease = FencedRedlockLease(name, token, ms, started, self._owner, drift,
                                                         summary, limit, fences)
            else:
                lease = RedlockLease(name, token, ms, started, self._owner, drift, summary, limit)
            if unknown and own_token:
                lease._unsure = tuple(unknown)
            return RedlockResult(name, status, summary, attempts, lease, self.quorum, errors), []
        if self._closed and (granted or unknown):  # closed meanwhile: nothing gives it back now
            raise acquire_lost_error([name], ClientClosedError())
        if unknown:
            self._release_owed(unknown, None, key, token, started + ms / 1000.0 + CLEANUP_GRACE, own_token)
        return RedlockResult(name, status, summary, attempts, None, self.quorum, errors), granted

    def _taken(self, result: RedlockResult, policy: AutoRenew | None, on_lost: OnLost | None) -> None:
        if policy is not None and result.lease is not None:
            self._renewer().add((result.lease,), policy, on_lost)

    @staticmethod
    def _tried(result: RedlockResult) -> RedlockLease | None:
        """What ``try_acquire`` returns of one attempt's result: the lease, or None;
        ``QuorumError`` when the masters could not decide."""
        if result.status is RedlockStatus.NO_QUORUM:
            raise QuorumError(f"could not reach a quorum for {result.describe()}", [result.name], result)
        return result.lease

    def _acquire_flow(self, name: str | bytes, ttl: Seconds, blocking: bool, timeout: Seconds | None,
                      token: bytes | None, auto_renew: bool | AutoRenew, on_lost: OnLost | None,
                      max_extensions: int | None, fenced: bool = False) -> Flow[RedlockResult]:
        wait = check_wait(blocking, timeout)
        attempt = self._attempting(name, ttl, token, auto_renew, on_lost, max_extensions, fenced)
        node_timeout = attempt[4]
        deadline = None if wait is None else time.monotonic() + wait
        until = deadline if wait else None  # a single try (no wait) keeps a first connect's grace
        attempts = 1
        own_token = token is None  # a new one each attempt
        result = yield from self._attempt_flow(name, attempt, attempts, until, own_token)
        while True:
            if result.lease is not None:
                self._taken(result, attempt[6], on_lost)
                return result
            refused = result.refused()
            if refused is not None:
                raise refused
            if wait == 0.0 or (self.retry_count is not None and attempts > self.retry_count):
                return result
            delay = random.uniform(0.0, self.retry_delay)
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return result
                if remaining < node_timeout:
                    # No retry could end by the deadline (it may wait a node timeout): the rest
                    # of the wait passes without one.
                    yield Call(self._pauses.pause, (remaining,))
                    self._refuse_if_closed()  # close() ended the pause
                    return result
                delay = min(delay, remaining - node_timeout)
            yield Call(self._pauses.pause, (delay,))  # close() ends it: the attempt then refuses
            attempts += 1
            if token is None:
                attempt = (attempt[0], secrets.token_bytes(TOKEN_BYTES), *attempt[2:])
            result = yield from self._attempt_flow(name, attempt, attempts, until, own_token)

    def _attempt_flow(self, name: str | bytes, attempt: Attempt, attempts: int, until: float | None = None,
                      own_token: bool = False) -> Flow[RedlockResult]:
        key, token, ms, _, node_timeout, _, _, _ = attempt
        self._refuse_if_closed()
        started = time.monotonic()
        if any(client._cleanup.on_its_way(key, token) for client in self.masters if len(client._cleanup)):
            # A release some master's cleanup sends with this token (a Lock given one, whose
            # earlier attempt got no answer) must end before an attempt may take the lock: this
            # one is "not acquired yet", nothing sent, and a wait tries again after its delay
            # (what is owed and not on its way goes out ahead of the attempt, on its connection).
            none: list[object] = [None] * len(self.masters)
            return self._attempted(name, attempt, started, none, [None] * len(none), attempts)[0]
        try:
            replies, failures = yield Call(self._fan_one, self._attempt_call(attempt),
                                           None if until is None else {"until": until})
        except BaseException:  # interrupted or cancelled: it may have taken the lock anywhere
            self._abandoned(key, token, started + ms / 1000.0 + CLEANUP_GRACE, own_token)
            raise
        result, granted = self._attempted(name, attempt, started, replies, failures, attempts, own_token)
        if granted:
            yield from self._give_back_flow(granted, key, token, started, ms, node_timeout)
        return result

    def _give_back_flow(self, granted: Sequence[int], key: bytes, token: bytes, started: float, ms: int,
                        node_timeout: float) -> Flow[list[object]]:
        """A failed attempt's release on the masters that granted it, within what is left of the
        attempt's node timeout (``GIVE_BACK_FLOOR`` at the least): an attempt costs one node
        timeout, and a master that does not answer by then is released in the background."""
        left = floored(started + node_timeout, GIVE_BACK_FLOOR) - time.monotonic()
        return (yield from self._release_keys_flow(granted, key, token, started + ms / 1000.0 + CLEANUP_GRACE,
                                                   left))

    def _release_keys_flow(self, only: Sequence[int] | None, key: bytes, token: bytes, expires_at: float,
                           node_timeout: float) -> Flow[list[object]]:
        """Compare-and-delete ``key`` on every master (or those in ``only``); where no answer
        came, again when the master answers."""
        try:
            replies, _ = yield Call(self._fan_one, (self._compare_delete(key, token), node_timeout,
                                                    _scripts.RELEASE, only))
        except BaseException:  # interrupted or cancelled: the release is still owed everywhere
            self._release_owed(only, None, key, token, expires_at)
            raise
        self._release_owed(only, replies, key, token, expires_at)
        return replies if only is None else [replies[m] for m in only]

    @staticmethod
    def _compare_delete(key: bytes, token: bytes) -> Callable[[Any], None]:
        sha = _scripts.RELEASE.sha

        def encode(buf: Any) -> None:
            buf.append_evalsha(sha, key, token, None)
        return encode

    def _release_owed(self, only: Sequence[int] | None, replies: list[object] | None, key: bytes,
                      token: bytes, expires_at: float, recheck: bool = False) -> None:
        """Where a release got no answer (everywhere when ``replies`` is None: it was
        interrupted), it is sent again when that master answers."""
        for m in range(len(self.masters)) if only is None else only:
            if replies is None or type(replies[m]) is not int:
                remember(self.masters[m], [key], [token], expires_at, recheck)

    def _releasing(self, lease: RedlockLease) -> tuple[RedlockLease, float, float]:
        """A release begins: the lease checked, its renewal stopped; (lease, per-node timeout,
        when its maybe-held releases are forgotten)."""
        self._refuse_if_closed()
        lease = self._check_lease(lease)
        if lease.renewal is not None:
            self._renewer().remove((lease,))
        lease._released = True
        lease_released(lease, True)  # given up from here, as its status says (UNLOCKED)
        forget_at = time.monotonic() + lease.ttl_ms / 1000.0 + CLEANUP_GRACE
        return lease, self.node_timeout_for(lease.ttl_ms), forget_at

    def _released(self, lease: RedlockLease, replies: list[object], forget_at: float, started: float) -> bool:
        """A release's outcome from every master's reply to compare-and-delete; ``started``: when
        it was sent (0.0 when no metrics sink listened then)."""
        if lease._unsure:
            for m, reply in enumerate(replies):
                owe_release(self.masters[m], m, lease, reply, forget_at)
        else:
            self._release_owed(None, replies, lease.key, lease.token, forget_at)
        released = errored = 0
        for reply in replies:
            if type(reply) is not int:
                errored += 1
            elif _scripts.released(reply):
                released += 1
        sink = _metrics.sink
        if sink is not None and (released >= self.quorum or released + errored < self.quorum):
            sink.released(int(released >= self.quorum), int(released < self.quorum), _metrics.since(started),
                          "release")
        if released >= self.quorum:
            return True
        if released + errored >= self.quorum:
            summary = InstanceSummary(released, len(replies) - released - errored, errored)
            raise QuorumError(
                f"release of lock {lease.name!r} is unconfirmed: released on {released}, not ours on "
                f"{summary.conflicted}, no answer from {errored} of {len(replies)} masters (quorum "
                f"{self.quorum}); {self._owed_release_fate(RETRIED_ON_MASTERS)}", [lease.name])
        return False

    def _query_flow(self, name: str | bytes) -> Flow[LockInfo]:
        self._refuse_if_closed()
        key = encode_name(name)

        def encode(buf: Any) -> None:
            buf.append_pttl(key)

        replies, _ = yield Call(self._fan_one, (encode, self.node_timeout or DEFAULT_NODE_TIMEOUT))
        held = self._standing(replies, f"the query for {name!r}", name)
        if held is None:
            return FREE
        return info_from_pttl(-1 if held == math.inf else int(held))

    def _standing(self, replies: list[Any], asked: str, name: str | bytes) -> float | None:
        """From the masters' PTTLs of a key (-2 where it is gone): how long it stands on a quorum
        (the quorum-th longest), or None when fewer than a quorum have it even counting every
        master that did not answer as having it. ``QuorumError`` when those could make either."""
        answered = [reply for reply in replies if type(reply) is int]
        held = sorted((math.inf if ms == -1 else ms for ms in answered if ms >= 0 or ms == -1), reverse=True)
        verdict = extend_verdict(len(held), len(replies) - len(answered), self.quorum)
        if verdict is UNDECIDED:
            raise QuorumError(
                f"{asked} is undecided: {len(held)} of {len(replies)} masters have it, "
                f"{len(replies) - len(answered)} did not answer (quorum {self.quorum})", [name])
        return held[self.quorum - 1] if verdict is EXTENDED else None

    def _check_flow(self, lease: RedlockLease) -> Flow[float | None]:
        self._refuse_if_closed()
        lease = self._check_lease(lease)
        key, token, sha = lease.key, lease.token, _scripts.CHECK.sha

        def encode(buf: Any) -> None:
            buf.append_evalsha(sha, key, token, None)

        replies, _ = yield Call(self._fan_one, (encode, self.node_timeout_for(lease.ttl_ms), _scripts.CHECK))
        if lease._set_again:  # keys set again without a majority are not held there (see tally)
            replies = [-2 if m in lease._set_again and type(reply) is int else reply
                       for m, reply in enumerate(replies)]
        ours = self._standing(replies, f"the check of {lease.name!r}", lease.name)
        if ours is None:
            return None
        return math.inf if ours == math.inf else ours / 1000.0

    def _extend_flow(self, lease: RedlockLease, ttl: Seconds, additive: bool) -> Flow[bool]:
        self._refuse_if_closed()
        lease = self._check_lease(lease)
        ms, drift, node_timeout = self._ttl(extend_ms(lease, ttl, additive) / 1000.0)
        if lease._released:
            return False
        if lease.max_extensions is not None and lease.extensions >= lease.max_extensions:
            raise ExtensionLimitError(
                f"lock {lease.name!r} was already extended {lease.extensions} times, its max_extensions",
                names=[lease.name])
        if lease.valid_for() <= 0:
            return False
        began = time.monotonic()
        ok, verdict, standing = yield from self._extend_one_flow(lease, ms, drift, node_timeout)
        sink = _metrics.sink
        if sink is not None and verdict != UNDECIDED:
            sink.extended(int(ok), int(not ok), time.monotonic() - began, "extend")
        if ok:
            if lease.renewal is not None:
                self._renewer().rescheduled(lease)
            return True
        if verdict == UNDECIDED:
            raise QuorumError(f"extend of lock {lease.name!r} is unconfirmed: {standing} "
                              f"(quorum {self.quorum})", [lease.name])
        return False

    def _extend_one_flow(self, lease: RedlockLease, ms: int, drift: float,
                         node_timeout: float) -> Flow[tuple[bool, str, str]]:
        sha = EXTEND.sha
        key, token = lease.key, lease.token

        def encode(buf: Any) -> None:
            buf.append_evalsha(sha, key, token, ms)

        started = time.monotonic()
        commands_sent((lease,), started, started + (ms - drift) / 1000.0)
        try:
            replies, _ = yield Call(self._fan_one, (encode, node_timeout, EXTEND))
        except BaseException:
            extends_unconfirmed(self, (lease,), started)
            raise
        count = tally(replies, lease._set_again)
        summary = InstanceSummary(count.done, count.theirs, len(replies) - count.done - count.theirs)
        verdict = extend_verdict(count.held, summary.errored, self.quorum)
        if verdict == EXTENDED and started + (ms - drift) / 1000.0 > time.monotonic():
            lease.drift_ms = drift
            commands_ran((lease,), started, ms)
            lease.extensions += 1
            lease.instances = summary
            lease._set_again = ()  # held on a majority: the keys set again are its copies now
            return True, verdict, count.standing(len(replies))
        lease._set_again = count.again
        extends_unconfirmed(self, (lease,), started)  # extended on some masters, perhaps: it can only shrink
        if verdict == LOST:
            self._lease_lost(lease, f"an extend found it no longer held on a majority "
                                    f"({count.standing(len(replies))}; quorum {self.quorum})")
            if count.done:  # keys it set again or extended on a minority: released in the background
                self._abandoned(key, token, time.monotonic() + ms / 1000.0 + CLEANUP_GRACE)
        return False, verdict, count.standing(len(replies))

    def _acquire_many_flow(self, names: Sequence[str | bytes], ttl: Seconds, all_or_nothing: bool,
                           tokens: Sequence[bytes] | None, auto_renew: bool | AutoRenew,
                           on_lost: OnLost | None, max_extensions: int | None,
                           limit: int | None, fenced: bool = False) -> Flow[RedlockManyResult]:
        self._refuse_if_closed()  # a claim of no names too
        ms, drift, node_timeout = self._ttl(ttl)
        check_flag(all_or_nothing, "all_or_nothing")
        max_ext = count_int(max_extensions, "max_extensions", allow_none=True)
        policy = self._renew_policy(auto_renew, on_lost, ms, node_timeout)
        if limit is None:
            result = yield from acquire_many_flow(self, names, ms, drift, all_or_nothing, tokens, max_ext,
                                                  fenced)
        else:
            result = yield from claim_many_flow(self, names, ms, drift, limit, all_or_nothing, tokens,
                                                max_ext, fenced)
        if policy is not None:
            self._renewer().add(result.acquired, policy, on_lost)
        return result
