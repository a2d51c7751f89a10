"""One auto-renewal round on one server, written once for the renewal thread and the renewal task.

Due locks go out in batches, one EVALSHA of ``RENEW_MANY`` per chunk of up to ``RENEW_CHUNK``
keys of one ttl, whose reply names only the keys that failed; each batch is settled as its reply
arrives, while the server runs the next ones. A lock ends every renewal renewed, lost (its key
gone or another token's), or indeterminate (no reply, an error): retried until shortly before
its safe-until, then lost.
The round never waits past its leases' expiry (``RenewalBook.round_deadline``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from turbolock._flows.renewal_book import batch_encoders, describe_reply, no_reply, split_batches
from turbolock._flows.steps import Call, Flow
from turbolock._wire.outcomes import NOT_SENT, UNKNOWN, failures
from turbolock._wire.scripts import RENEW_MANY
from turbolock.errors import ReplyError
from turbolock.lease import Lease

log = logging.getLogger("turbolock.renewal")


def renew_round_flow(client: Any, renewer: Any, leases: list[Lease]) -> Flow[None]:
    """Renew ``leases`` (due now); ``renewer`` is the thread's or the task's, whose book,
    ``_failed`` and ``_lost`` settle each lease. ``client._renew_batches`` sends the scripts
    (a Redis Cluster client reads the batches themselves, to split them per master)."""
    book = renewer.book
    batches = split_batches(leases)
    encode, reencode = batch_encoders(batches, RENEW_MANY.sha, client.core)
    settled = [False] * len(batches)

    def settle(index: int, reply: object) -> None:
        ttl_ms, batch = batches[index]
        settled[index] = True
        failed = failures(reply, len(batch))
        if failed is not None:
            lost, undecided = book.settle(batch, failed, sent_at, ttl_ms)
            if lost:  # all marked before any on_lost runs, logged in one line
                lose_together(renewer, [(lease, "its key was gone or held by another token at renewal")
                                        for lease in lost])
            if undecided:
                unknown = [lease for lease, outcome in undecided if outcome is UNKNOWN]
                if unknown:
                    renewer._failed(unknown, sent_at, sent=True)
                if len(unknown) < len(undecided):
                    renewer._failed([lease for lease, outcome in undecided if outcome is not UNKNOWN],
                                    sent_at, sent=False)
            return
        if no_reply(reply):
            renewer._failed(batch, sent_at, sent=reply is not NOT_SENT)
            return
        log.warning("turbolock: renewal of %d locks got %s", len(batch), describe_reply(reply))
        renewer._failed(batch, sent_at, sent=False)

    def on_replies(start: int, replies: list[object]) -> None:
        # Settled while the server runs the next scripts; NOSCRIPT ones wait for their retry.
        for index, reply in enumerate(replies, start):
            if not (type(reply) is ReplyError and reply.code == "NOSCRIPT"):
                settle(index, reply)

    sent_at = time.monotonic()
    deadline = book.round_deadline(leases, sent_at, client.options.timeout)
    for ttl_ms, batch in batches:
        book.sending(batch, ttl_ms, sent_at)
    try:
        replies = yield Call(client._renew_batches, (batches, encode, reencode, on_replies, deadline))
    except Exception as exc:  # no connection at all: nothing was sent
        log.warning("turbolock: renewal of %d locks could not be sent: %s", len(leases), exc)
        replies = [NOT_SENT] * len(batches)  # settled together below
    except BaseException:  # cancelled (stop, or the loop ends) or interrupted: whatever was sent may run
        for index, (_, batch) in enumerate(batches):
            if not settled[index]:
                book.cut_short(batch, sent_at)
        raise
    unanswered: dict[bool, list[Lease]] = {}
    for index, reply in enumerate(replies):
        if settled[index]:
            continue
        if no_reply(reply):  # the batches the round's end cut off, settled together (see lose_together)
            settled[index] = True
            unanswered.setdefault(reply is not NOT_SENT, []).extend(batches[index][1])
        else:
            settle(index, reply)
    for sent, cut_off in unanswered.items():
        renewer._failed(cut_off, sent_at, sent=sent)


def lose_unrenewed(renewer: Any, client: Any, leases: list[Lease], now: float) -> None:
    """``leases`` could not be renewed before their safe-until: each is lost, and one whose
    renewal went out without a reply is released in the background too, since that renewal may
    still run (a stopped server runs what it buffered when it resumes) and hold the key for us
    after the program was told the lock is gone."""
    lose_together(renewer, [(lease, "it could not be renewed before it expired") for lease in leases])
    for lease in leases:
        release_ghost(client, lease, now)


def lose_together(renewer: Any, lost: list[tuple[Lease, str]]) -> None:
    """Leases found lost at once, each with its reason: every one is marked lost first (its
    ``lost`` set before its expiry, however many they are), then each is signalled to its
    ``on_lost``; many are logged in one line, not one each."""
    book = renewer.book
    states = [(lease, book.lose(lease, reason)) for lease, reason in lost]
    marked = [(lease, state) for lease, state in states if state is not None]
    if len(marked) == 1:
        log.warning("turbolock: lock %r lost: %s", marked[0][0].name, marked[0][0].lost_reason)
    elif marked:
        first = marked[0][0]
        log.warning("turbolock: %d locks lost, lock %r among them: %s", len(marked), first.name,
                    first.lost_reason)
    for lease, state in marked:
        renewer._signal(lease, state)


def release_ghost(client: Any, lease: Lease, now: float) -> None:
    """A lease declared lost while a renewal of it had no reply: released in the background,
    since that renewal may still run and hold the key for us."""
    ghost = lease._ghost
    if ghost is not None:
        client._abandoned(lease.key, lease.token, now + ghost)


def take_due(renewer: Any) -> list[Lease]:
    """The start of a renewer's wake-up, with no I/O: release what the program dropped, signal
    what expired unrenewed, and return what is due (most wake-ups: nothing, and no flow runs)."""
    renewer._release_dropped()
    to_send: list[Lease]
    now = time.monotonic()
    to_send, lost = renewer.book.take_due(now, renewer.lead)
    if lost:
        lose_together(renewer, lost)
        for lease, _ in lost:
            release_ghost(renewer._client, lease, now)
    return to_send


def due_round_flow(renewer: Any, to_send: list[Lease]) -> Flow[None]:
    """Renew ``to_send`` (``renewer._send``). Whatever goes wrong, the locks are retried."""
    try:
        yield Call(renewer._send, (to_send,))
    except Exception:  # the renewer must survive anything
        log.exception("turbolock: renewal round failed; retrying its locks")
        renewer._failed(to_send, None)


SLOW_ON_LOST = 0.1
"""Seconds an ``on_lost`` callback may run on the renewer before a warning says it held up the
renewal of every other lock of the client."""


def call_on_lost(on_lost: Callable[[Lease], object], lease: Lease) -> object:
    """``on_lost(lease)`` on the renewer (its thread, or its event loop): what it returned, or
    None when it raised (logged: a callback must never stop the renewer). One that runs long is
    named in a warning, since no lock of the client is renewed meanwhile."""
    started = time.monotonic()
    try:
        return on_lost(lease)
    except Exception:
        log.exception("turbolock: on_lost callback for lock %r raised", lease.name)
        return None
    finally:
        took = time.monotonic() - started
        if took > SLOW_ON_LOST:
            log.warning("turbolock: on_lost callback for lock %r ran %.2fs on the renewer, and no lock of "
                        "this client was renewed meanwhile: hand slow work to another thread or task",
                        lease.name, took)
