"""One auto-renewal round of Redlocks, written once for the renewal thread and the renewal task.

Each round sends one multi-key script per chunk of due locks to every master at once. A lock is
renewed when a quorum extended it (or set it again where a master had lost it) with validity
left; lost when others hold it on so many masters that no quorum is possible any more;
otherwise (masters not answering) retried until its validity ends, then lost. Loss is signalled
as for single locks: ``lease.lost``, ``on_lost(lease)``, ``lease.ensure_held()``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, cast

from turbolock._flows.redlock_result import InstanceSummary, RedlockLease
from turbolock._flows.redlock_rules import CLEANUP_GRACE, RedlockRules
from turbolock._flows.renewal_book import COMMANDS_PER_WRITE, batch_encoders, split_batches
from turbolock._flows.renewal_round import lose_together
from turbolock._flows.steps import Call, Flow, Outcome
from turbolock._wire.redlock_scripts import EXTENDED, LOST, RENEW_MANY, extend_verdict, tally
from turbolock.lease import Lease

log = logging.getLogger("turbolock.renewal")


def extensions_used_up(lease: Lease) -> bool:
    """Whether a Redlock lease has used up its ``max_extensions`` (the renewal book asks)."""
    return (isinstance(lease, RedlockLease) and lease.max_extensions is not None
            and lease.extensions >= lease.max_extensions)


def renew_round_flow(client: RedlockRules, renewer: Any, leases: list[Lease]) -> Flow[None]:
    """Renew ``leases`` (due now) on the masters; ``renewer`` is the thread's or the task's, whose
    book, ``_failed`` and ``_lost`` settle each lease. Locks of one ttl go out together."""
    groups: dict[int, list[Lease]] = {}
    for lease in leases:
        groups.setdefault(lease.ttl_ms, []).append(lease)
    for ttl_ms, group in groups.items():
        yield from _renew_group_flow(client, renewer, ttl_ms, [cast(RedlockLease, lease) for lease in group])


def _renew_group_flow(client: RedlockRules, renewer: Any, ttl_ms: int,
                      group: list[RedlockLease]) -> Flow[None]:
    book = renewer.book
    batches = split_batches(cast(list[Lease], group))  # one ttl here, so one group
    encode, reencode = batch_encoders(batches, RENEW_MANY.sha, client.core)
    sent_at = time.monotonic()
    deadline = book.round_deadline(group, sent_at, client.chunk_timeout_for(ttl_ms))
    for _, chunk in batches:
        book.sending(chunk, ttl_ms, sent_at)
    try:
        step = Call(client._fan_many, (len(batches), encode, max(0.0, deadline - sent_at), COMMANDS_PER_WRITE,
                                       RENEW_MANY, reencode))
        outcome: Outcome = yield step
    except Exception as exc:  # the renewer must survive anything: retry every lock
        log.warning("turbolock: Redlock renewal of %d locks could not be sent: %s", len(group), exc)
        renewer._failed(list(group), sent_at)
        return
    except BaseException:  # cancelled, or the thread is interrupted: whatever was sent may run
        book.cut_short(list(group), sent_at)
        raise
    if not outcome.started:  # no master could be reached at all
        renewer._failed(list(group), sent_at, sent=False)
        return
    now = time.monotonic()
    quorum = client.quorum
    masters = len(outcome.replies)
    retry: list[Lease] = []
    for b, (_, plain) in enumerate(batches):
        batch = cast(list[RedlockLease], plain)
        rows = [_answers(row[b], len(batch)) for row in outcome.replies]
        renewed: list[RedlockLease] = []
        summaries: list[InstanceSummary] = []
        lost: list[tuple[Lease, str]] = []
        for j, one in enumerate(batch):
            count = tally([None if answers is None else answers[j] for answers in rows], one._set_again)
            summary = InstanceSummary(count.done, count.theirs, masters - count.done - count.theirs)
            if one._released:  # released meanwhile: a master the renewal reached after the release's
                if count.done or summary.errored:  # delete has the key set again, or may yet have
                    client._abandoned(one.key, one.token, now + ttl_ms / 1000.0 + CLEANUP_GRACE,
                                      bool(summary.errored))
                continue
            verdict = extend_verdict(count.held, summary.errored, quorum)
            if verdict == EXTENDED and sent_at + (ttl_ms - one.drift_ms) / 1000.0 > now:
                renewed.append(one)
                summaries.append(summary)
                continue
            one._set_again = count.again
            if verdict == LOST:
                book.refused((one,), sent_at)
                lost.append((one, f"its renewal found it no longer held on a majority "
                                  f"({count.standing(masters)}; quorum {quorum})"))
                if count.done:  # set again or extended on a minority: released in the background
                    client._abandoned(one.key, one.token, now + ttl_ms / 1000.0 + CLEANUP_GRACE)
            else:
                retry.append(one)
        if lost:  # all marked before any on_lost runs, logged in one line
            lose_together(renewer, lost)
        if renewed:
            book.renewed(renewed, sent_at, ttl_ms)
            for red, summary in zip(renewed, summaries, strict=True):
                if red._released:  # released while other leases' on_lost ran: not extended for it
                    continue
                red.extensions += 1
                red.instances = summary
                red._set_again = ()  # held on a majority: the keys set again are its copies now
    if retry:
        renewer._failed(retry, sent_at)


def _answers(reply: object, size: int) -> list[object] | None:
    """One master's per-key answers to a renewal script, or None when it gave none usable."""
    if isinstance(reply, list) and len(reply) == size:
        return reply
    return None
