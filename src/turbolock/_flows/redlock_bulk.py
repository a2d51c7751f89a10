"""Bulk Redlock: acquire, extend and release thousands of independent locks on every master at once.

Every master gets the whole batch, in chunks encoded once and written to all masters before
any is read (see ``_redlock.fanout``); the quorum and the validity are decided per name, the
validity counted from before the first write of that name's chunk. Names that miss the quorum
are released on every master, so nothing is left held where the lock did not count.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from turbolock._flows.bulk_plan import batch_tokens, check_size, check_tokens, encode_unique_names
from turbolock._flows.client_settings import acquire_lost_error, check_fenced_keys
from turbolock._flows.redlock_result import (
    FencedRedlockLease,
    InstanceSummary,
    MasterFences,
    RedlockLease,
    RedlockManyResult,
    RedlockStatus,
    decide,
)
from turbolock._flows.redlock_rules import (
    CLEANUP_GRACE,
    RETRIED_ON_MASTERS,
    RedlockRules,
    owe_release,
    remember,
)
from turbolock._flows.renewal_book import check_renewed_ttl, extends_unconfirmed
from turbolock._flows.steps import Call, Flow, Outcome
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import GIVE_BACK_FLOOR, UNKNOWN, bulk_budget, floored
from turbolock._wire.redlock_scripts import EXTEND, EXTENDED, LOST, extend_verdict, tally
from turbolock._wire.validate import Seconds
from turbolock.errors import ClientClosedError, ExtensionLimitError, InvalidArgumentError, QuorumError
from turbolock.lease import (
    commands_ran,
    commands_refused,
    commands_sent,
    keys_of,
    lease_released,
)

_OK = b"OK"


def acquire_many_flow(client: RedlockRules, names: Sequence[str | bytes], ms: int, drift: float,
                      all_or_nothing: bool, tokens: Sequence[bytes] | None,
                      max_extensions: int | None, fenced: bool = False,
                      own_tokens: bool = False, down: set[int] | None = None) -> Flow[RedlockManyResult]:
    """Every name on every master at once, the quorum decided per name. ``fenced``: the fenced
    acquire script instead of ``SET NX``, each lease a ``FencedRedlockLease``. ``own_tokens``:
    ``tokens`` were made by the client (a claim's), as when none are given. ``down``: masters
    that failed earlier in the same call (a claim's earlier chunks), left out and counted as
    failed; those that fail here are added to it."""
    client._refuse_if_closed()
    keys = encode_unique_names(names, client.core)
    names = list(names)
    count = len(keys)
    fenced = check_fenced_keys(fenced, client.key_prefix, keys, 0)
    fresh_tokens = tokens is None
    made_here = fresh_tokens or own_tokens  # a lost reply's lock is released again a little later
    tokens = [b""] * count if tokens is None else check_tokens(tokens, count)
    append_fenced = _scripts.FENCED_ACQUIRE.append_each

    def encode(buf: Any, start: int, stop: int) -> None:
        # Encoded once per chunk; the same bytes go to every master.
        if fresh_tokens:
            tokens[start:stop] = batch_tokens(stop - start)
        if fenced:
            append_fenced(buf, keys[start:stop], tokens[start:stop], ms)
        else:
            buf.append_set_nx_px_many(keys[start:stop], tokens[start:stop], ms)

    def reencode(buf: Any, indices: Sequence[int]) -> None:  # after NOSCRIPT (fenced only)
        append_fenced(buf, [keys[i] for i in indices], [tokens[i] for i in indices], ms)

    def granted(reply: object) -> bool:
        return type(reply) is int if fenced else reply == _OK

    masters = len(client.masters)
    quorum = client.quorum
    life = (ms - drift) / 1000.0
    owner = client._owner
    everywhere = InstanceSummary(masters, 0, 0)
    summaries: dict[tuple[int, int], InstanceSummary] = {}
    leases: list[RedlockLease | None] = [None] * count
    statuses: list[RedlockStatus] = [RedlockStatus.NO_QUORUM] * count
    acquired = [0] * count
    conflicted = [0] * count
    failed: list[int] = []

    def on_chunk(start: int, stop: int, started: float, rows: list[list[object]]) -> None:
        # Decided as each chunk comes in, while the masters work on the next one.
        valid = started + life > time.monotonic()
        size = stop - start
        if valid and all(row.count(_OK) == size for row in rows):  # the common case: taken everywhere
            statuses[start:stop] = [RedlockStatus.ACQUIRED] * size
            acquired[start:stop] = [masters] * size
            leases[start:stop] = [
                RedlockLease(name, token, ms, started, owner, drift, everywhere, max_extensions)
                for name, token in zip(names[start:stop], tokens[start:stop], strict=True)]
            return
        _decide_chunk(start, stop, started, rows, valid)

    def _decide_chunk(start: int, stop: int, started: float, rows: list[list[object]], valid: bool) -> None:
        size = stop - start
        ok = [0] * size
        held = [0] * size
        for row in rows:
            ok = [n + 1 if granted(reply) else n for n, reply in zip(ok, row, strict=True)]
            held = [n + 1 if reply is None else n for n, reply in zip(held, row, strict=True)]
        acquired[start:stop] = ok
        conflicted[start:stop] = held
        for j in range(size):
            i = start + j
            key = (ok[j], held[j])
            summary = summaries.get(key)
            if summary is None:
                summary = summaries[key] = InstanceSummary(ok[j], held[j], masters - ok[j] - held[j])
            status = decide(summary, quorum, valid)
            statuses[i] = status
            if status is RedlockStatus.ACQUIRED and fenced:
                column = (row[j] for row in rows)
                fences = MasterFences((reply if type(reply) is int else None for reply in column),
                                      client.master_names)
                leases[i] = FencedRedlockLease(names[i], tokens[i], ms, started, owner, drift,
                                               summary, max_extensions, fences)
            elif status is RedlockStatus.ACQUIRED:
                leases[i] = RedlockLease(names[i], tokens[i], ms, started, owner, drift, summary,
                                         max_extensions)
            elif ok[j] or summary.errored:
                failed.append(i)
                continue
            if summary.errored and made_here:  # a master's reply lost: its SET may still land
                unsure = tuple(m for m, row in enumerate(rows) if row[j] is UNKNOWN)
                if unsure:
                    leases[i]._unsure = unsure  # type: ignore[union-attr]

    timeout = client.chunk_timeout_for(ms)
    budget_ends = time.monotonic() + bulk_budget(timeout, count, client.chunk_size)
    only = [m for m in range(masters) if m not in down] if down else None
    try:
        if fenced:  # decided once every chunk is in: those answered NOSCRIPT are sent again first
            outcome = yield Call(client._fan_many, (count, encode, timeout, client.chunk_size,
                                                    _scripts.FENCED_ACQUIRE, reencode), {"only": only})
        else:
            outcome = yield Call(client._fan_many, (count, encode, timeout, client.chunk_size),
                                 {"on_chunk": on_chunk, "only": only})
    except BaseException:  # interrupted or cancelled: whatever was sent may be held anywhere
        _abandon_sent(client, keys, tokens, ms, made_here)
        raise
    if down is not None:
        for m in down:  # nothing was sent there: nothing to give back there either
            outcome.errors[m] = outcome.errors[m] or "left out: it failed earlier in the call"
        down.update(m for m, error in enumerate(outcome.errors) if error is not None)
    chunk = client.chunk_size
    for n, started in enumerate(outcome.started if fenced else ()):
        start = n * chunk
        stop = min(count, start + chunk)
        _decide_chunk(start, stop, started, [row[start:stop] for row in outcome.replies],
                      started + life > time.monotonic())
    if not outcome.started:  # no master could be reached: nothing was sent
        acquired, conflicted = [0] * count, [0] * count
    errored = [masters - a - c for a, c in zip(acquired, conflicted, strict=True)]
    if all_or_nothing and any(lease is None for lease in leases):
        failed = [i for i in range(count) if acquired[i] or errored[i]]
        leases = [None] * count
    if failed and client._closed:  # closed meanwhile: nothing gives them back, the caller is told
        error = acquire_lost_error([names[i] for i in failed], ClientClosedError())
        error.acquired = [lease for lease in leases if lease is not None]
        raise error
    if failed:
        try:
            # Within what is left of the call's budget: an unanswered release goes to the background.
            left = min(timeout, floored(budget_ends, GIVE_BACK_FLOOR) - time.monotonic())
            yield from _release_failed(client, outcome.errors, outcome.replies, keys, tokens, failed, ms,
                                       left, granted, made_here)
        except BaseException:  # interrupted or cancelled: the caller gets none of the leases either
            _abandon_sent(client, keys, tokens, ms, made_here)
            raise
    return RedlockManyResult(names, leases, statuses, quorum, acquired, conflicted, errored)


def _abandon_sent(client: RedlockRules, keys: list[bytes], tokens: list[bytes], ms: int,
                  recheck: bool) -> None:
    """An acquire interrupted or cancelled: every name it sent may be held on any master, and
    nobody will hold its lease; all are released in the background."""
    forget_at = time.monotonic() + ms / 1000.0 + CLEANUP_GRACE
    for key, token in zip(keys, tokens, strict=True):
        if token:  # encoded, so perhaps sent
            client._abandoned(key, token, forget_at, recheck)


def _tally(rows: list[list[object]], count: int, hit: Any) -> list[int]:
    totals = [0] * count
    for row in rows:
        totals = [total + 1 if hit(reply) else total for total, reply in zip(totals, row, strict=True)]
    return totals


def _release_failed(client: RedlockRules, errors: list[str | None], acquire_rows: list[list[object]],
                    keys: list[bytes], tokens: list[bytes], failed: list[int], ms: int,
                    timeout: float, granted: Any, own_tokens: bool) -> Flow[None]:
    """Release every name that did not count, on every master; remember it where it may be held
    and the release got no answer. Where the acquire's own reply was lost, its write may still
    land after that release: with tokens the client made (``own_tokens``), released again a
    little later (``CleanupBook``'s recheck), as a single acquire's is."""
    sub_keys = [keys[i] for i in failed]
    sub_tokens = [tokens[i] for i in failed]
    # Masters that failed the acquire would cost another timeout: theirs go to the background.
    answered = [m for m, error in enumerate(errors) if error is None]
    replies = yield from run_release_flow(client, sub_keys, sub_tokens, timeout, answered)
    expires_at = time.monotonic() + ms / 1000.0 + CLEANUP_GRACE
    for master, acquire_row, release_row in zip(client.masters, acquire_rows, replies, strict=True):
        for j, i in enumerate(failed):
            lost = acquire_row[i] is UNKNOWN
            if (granted(acquire_row[i]) or lost) and type(release_row[j]) is not int:
                remember(master, [keys[i]], [tokens[i]], expires_at, own_tokens and lost)


def run_release_flow(client: RedlockRules, keys: list[bytes], tokens: list[bytes],
                     timeout: float, only: Sequence[int] | None = None) -> Flow[list[list[object]]]:
    sha = _scripts.RELEASE.sha

    def encode(buf: Any, start: int, stop: int) -> None:
        buf.append_evalsha_many(sha, keys[start:stop], tokens[start:stop], None)

    def reencode(buf: Any, indices: Sequence[int]) -> None:
        buf.append_evalsha_many(sha, [keys[i] for i in indices], [tokens[i] for i in indices], None)

    step = Call(client._fan_many, (len(keys), encode, timeout, client.chunk_size, _scripts.RELEASE, reencode),
                {"only": only})
    outcome: Outcome = yield step
    return outcome.replies


def _check_leases(client: RedlockRules, leases: Sequence[RedlockLease]) -> list[RedlockLease]:
    check_size(leases, "leases")
    checked = [client._check_lease(lease, "leases") for lease in leases]
    if len({lease.key for lease in checked}) != len(checked):
        raise InvalidArgumentError("leases", "lists one lock more than once")
    return checked


def release_many_flow(client: RedlockRules, leases: Sequence[RedlockLease]) -> Flow[list[bool]]:
    checked = _check_leases(client, leases)
    if not checked:
        return []
    renewed = [lease for lease in checked if lease.renewal is not None]
    if renewed:
        client._renewer().remove(renewed)
    timeout = client.chunk_timeout_for(min(lease.ttl_ms for lease in checked))
    keys = keys_of(checked, client.core)
    tokens = [lease.token for lease in checked]
    for lease in checked:
        lease._released = True
        lease_released(lease, True)  # given up from here, as its status says (UNLOCKED)
    try:
        rows = yield from run_release_flow(client, keys, tokens, timeout)
    except BaseException:  # cancelled or interrupted: every release is owed, on every master
        _owe_releases(client, checked, [[UNKNOWN] * len(checked) for _ in client.masters])
        raise
    count = len(checked)
    released = _tally(rows, count, _scripts.released)
    errored = _tally(rows, count, lambda reply: type(reply) is not int)
    _owe_releases(client, checked, rows)
    quorum = client.quorum
    results = [done >= quorum for done in released]
    unknown = [lease.name for lease, done, err in zip(checked, released, errored, strict=True)
               if done < quorum <= done + err]
    if unknown:
        raise QuorumError(
            f"the release of {len(unknown)} locks is unconfirmed: too many masters gave no answer for a "
            f"quorum; {client._owed_release_fate(RETRIED_ON_MASTERS)}", unknown)
    return results


def _owe_releases(client: RedlockRules, leases: list[RedlockLease], rows: list[list[object]]) -> None:
    """The releases no master confirmed (no int reply: lost, not sent, an error) are retried on
    that master in the background until the lock's ttl has passed."""
    now = time.monotonic()  # a key may live a ttl from its last write (an extend's may be unknown)
    for m, (master, row) in enumerate(zip(client.masters, rows, strict=True)):
        for lease, reply in zip(leases, row, strict=True):
            if type(reply) is not int or lease._unsure:
                owe_release(master, m, lease, reply, now + lease.ttl_ms / 1000.0 + CLEANUP_GRACE)


def extend_many_flow(client: RedlockRules, leases: Sequence[RedlockLease], ttl: Seconds) -> Flow[list[bool]]:
    checked = _check_leases(client, leases)
    ms, drift, _ = client._ttl(ttl)
    check_renewed_ttl(checked, ms)
    for lease in checked:
        if lease.max_extensions is not None and lease.extensions >= lease.max_extensions:
            raise ExtensionLimitError(
                f"lock {lease.name!r} was already extended {lease.extensions} times, its max_extensions",
                names=[lease.name])
    results = [False] * len(checked)
    live = [i for i, lease in enumerate(checked) if not lease._released and lease.valid_for() > 0]
    if not live:
        return results
    keys = keys_of([checked[i] for i in live], client.core)
    tokens = [checked[i].token for i in live]
    sha = EXTEND.sha

    def encode(buf: Any, start: int, stop: int) -> None:
        buf.append_evalsha_many(sha, keys[start:stop], tokens[start:stop], ms)

    def reencode(buf: Any, indices: Sequence[int]) -> None:
        buf.append_evalsha_many(sha, [keys[i] for i in indices], [tokens[i] for i in indices], ms)

    chunk = client.chunk_size
    sent_at = time.monotonic()
    extending_leases = [checked[i] for i in live]
    commands_sent(extending_leases, sent_at, sent_at + (ms - drift) / 1000.0)
    try:
        timeout = client.chunk_timeout_for(ms)
        outcome = yield Call(client._fan_many, (len(live), encode, timeout, chunk, EXTEND, reencode))
    except BaseException:
        extends_unconfirmed(client, extending_leases, sent_at)
        raise
    if not outcome.started:  # no master reached: nothing went out, every lease as it was
        commands_refused(extending_leases, sent_at)
        raise QuorumError(f"the extend of {len(live)} locks is unconfirmed: no master could be reached",
                          [lease.name for lease in extending_leases])
    now = time.monotonic()
    rows = outcome.replies
    quorum = client.quorum
    masters = len(rows)
    life = (ms - drift) / 1000.0
    unknown: list[str | bytes] = []
    renewer = client._renewer_instance
    for j, i in enumerate(live):
        lease = checked[i]
        started = outcome.started[j // chunk]
        count = tally([row[j] for row in rows], lease._set_again)
        summary = InstanceSummary(count.done, count.theirs, masters - count.done - count.theirs)
        verdict = extend_verdict(count.held, summary.errored, quorum)
        if verdict == EXTENDED and started + life > now:
            lease.drift_ms = drift
            commands_ran((lease,), sent_at, ms)
            lease.extensions += 1
            lease.instances = summary
            lease._set_again = ()  # held on a majority: the keys set again are its copies now
            results[i] = True
            if lease.renewal is not None and renewer is not None:
                renewer.rescheduled(lease)
        else:
            lease._set_again = count.again
            extends_unconfirmed(client, (lease,), sent_at)  # extended on some masters, perhaps
            if verdict == LOST:
                client._lease_lost(lease, f"an extend found it no longer held on a majority "
                                          f"({count.standing(masters)}; quorum {quorum})")
                if count.done:  # set again or extended on a minority: released in the background
                    client._abandoned(lease.key, lease.token, now + ms / 1000.0 + CLEANUP_GRACE)
            elif verdict != EXTENDED:
                unknown.append(lease.name)
    if unknown:
        raise QuorumError(
            f"the extend of {len(unknown)} locks is unconfirmed: too many masters gave no answer for a "
            "quorum", unknown)
    return results
