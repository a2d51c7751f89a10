"""Claiming at most k free Redlocks out of many names, for workers sharing shards.

The single-server claim (``claim``) runs a script that stops after the k-th free name; on
independent masters such a script would stop at different names on different masters. A
Redlock claim reuses the bulk path (``redlock_bulk.acquire_many_flow``) instead, one chunk at a
time, and a chunk never holds more names than are still wanted (nor more than ``chunk_size``):
whatever the masters answer, a claim cannot take more than ``limit``. Names that miss the
quorum are released on every master by the bulk path, as in any bulk acquire.

As in the single-server claim, the names are walked from a random starting point, so workers
sharing one list spread over it instead of all contending for its first names; names never
reached are ``NOT_TRIED``. A master that fails a chunk is left out of the next ones (they would
wait on it again), its names counted as failed there. A chunk in which no name reached a
decision (too many masters failed to answer for every one of them) ends the claim early: the
next chunks would wait on the same masters, so the rest stay ``NOT_TRIED``. A claim interrupted
part-way leaves the caller nothing: what it took, and what the interrupted chunk may have taken,
is released on every master with its tokens.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence

from turbolock._flows.bulk_plan import check_tokens, encode_unique_names
from turbolock._flows.claim import check_claim, check_limit, random_start, window
from turbolock._flows.client_settings import check_fenced_keys
from turbolock._flows.redlock_bulk import acquire_many_flow
from turbolock._flows.redlock_result import RedlockLease, RedlockManyResult, RedlockStatus
from turbolock._flows.redlock_rules import CLEANUP_GRACE, RedlockRules, remember
from turbolock._flows.steps import Flow
from turbolock._wire.validate import TOKEN_BYTES


def claim_many_flow(client: RedlockRules, names: Sequence[str | bytes], ms: int, drift: float, limit: object,
                    all_or_nothing: bool, tokens: Sequence[bytes] | None,
                    max_extensions: int | None, fenced: bool = False) -> Flow[RedlockManyResult]:
    """At most ``limit`` free names, each on a quorum of masters; a result for every name in
    input order. Everything is checked before anything is sent. ``fenced``: each lease taken
    comes with its fences, as in a fenced bulk acquire."""
    check_claim(limit, all_or_nothing)
    keys = encode_unique_names(names, client.core)
    fenced = check_fenced_keys(fenced, client.key_prefix, keys, 0)
    wanted = check_limit(limit)
    names = list(names)
    count = len(keys)
    given = None if tokens is None else check_tokens(tokens, count)

    leases: list[RedlockLease | None] = [None] * count
    statuses = [RedlockStatus.NOT_TRIED] * count
    acquired = [0] * count
    conflicted = [0] * count
    errored = [0] * count
    mine: list[RedlockLease] = []
    start = random_start(count)
    tried = 0
    down: set[int] = set()  # masters that failed a chunk: the next chunks would wait on them again
    while len(mine) < wanted and tried < count:
        size = min(wanted - len(mine), client.chunk_size, count - tried)
        chunk = window(count, start, tried, tried + size)
        if given is None:  # made here, not by the core: an interrupted chunk is given back with them
            blob = secrets.token_bytes(TOKEN_BYTES * size)
            chunk_tokens = [blob[j:j + TOKEN_BYTES] for j in range(0, len(blob), TOKEN_BYTES)]
        else:
            chunk_tokens = [given[i] for i in chunk]
        try:
            sub = yield from acquire_many_flow(client, [names[i] for i in chunk], ms, drift, False,
                                               chunk_tokens, max_extensions, fenced, own_tokens=given is None,
                                               down=down)
        except BaseException:
            _give_back(client, [(lease.key, lease.token) for lease in mine]
                       + [(keys[i], token) for i, token in zip(chunk, chunk_tokens, strict=True)], ms,
                       given is None)
            raise
        decided = False
        for j, i in enumerate(chunk):
            lease = leases[i] = sub.leases[j]
            if lease is not None:
                mine.append(lease)
            status = statuses[i] = sub.statuses[j]
            decided = decided or status is not RedlockStatus.NO_QUORUM
            acquired[i], conflicted[i], errored[i] = sub.summary(j)
        tried += size
        if not decided:
            break
    return RedlockManyResult(names, leases, statuses, client.quorum, acquired, conflicted, errored)


def _give_back(client: RedlockRules, locks: list[tuple[bytes, bytes]], ms: int,
               recheck: bool = False) -> None:
    """Release these (key, token) pairs on every master in the background, until they expired
    (``recheck``: tokens the claim made, released again a little later, see ``remember``)."""
    if not locks:
        return
    forget_at = time.monotonic() + ms / 1000.0 + CLEANUP_GRACE
    keys = [key for key, _ in locks]
    tokens = [token for _, token in locks]
    for master in client.masters:
        remember(master, keys, tokens, forget_at, recheck)
