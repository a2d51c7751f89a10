"""The asyncio claim: the blocking ``bulk_claim`` driver's loop, awaited.

A task cancelled mid-claim leaves nothing held: the leases it took, and whatever the chunk in
flight takes, are released with their tokens in the background.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._claim import CLAIM, ClaimPlan, ClaimResult, MaybeHeld
from .._executor import NOT_SENT, UNKNOWN
from .._validate import Seconds, ttl_ms
from ..errors import AcquireOutcomeUnknownError, ConnectionError

if TYPE_CHECKING:
    from .client import AsyncLockClient


async def claim_many(client: AsyncLockClient, names: Sequence[str | bytes], ttl: Seconds, limit: int,
                     tokens: Sequence[bytes] | None = None) -> ClaimResult:
    plan = ClaimPlan(names, ttl_ms(ttl), limit, tokens, client._owner, client.chunk_size)
    many = client._exec.many
    while not plan.finished:
        plan.next_chunk()
        plan.sent_at = time.monotonic()
        try:
            reply = (await many(1, plan.encode, CLAIM, plan.reencode))[0]
        except Exception:
            _give_back(client, plan.held(time.monotonic()))  # raised before the chunk ran
            raise
        except BaseException:
            # Cancelled: nobody reads the chunk's reply, so whatever it took is released blind.
            now = time.monotonic()
            _give_back(client, plan.held(now) + plan.maybe_held(now))
            raise
        if reply is UNKNOWN:
            now = time.monotonic()
            error = client._acquire_lost(plan.held(now) + plan.maybe_held(now),
                                         ConnectionError("the connection failed mid-claim"))
            if isinstance(error, AcquireOutcomeUnknownError):
                error.not_sent = plan.not_sent(chunk_sent=True)
            raise error
        if reply is NOT_SENT:
            _give_back(client, plan.held(time.monotonic()))
            raise ConnectionError("the connection failed before the claim was sent")
        if not plan.settle(reply):  # an error reply, or one it cannot read: it may have taken any
            now = time.monotonic()
            _give_back(client, plan.held(now) + plan.maybe_held(now))
            raise plan.error(reply)
    return plan.result()


def _give_back(client: AsyncLockClient, locks: list[MaybeHeld]) -> None:
    """Released with their tokens by the client's background cleanup."""
    for _, key, token, forget_at in locks:
        client._remember_cleanup(key, token, forget_at)
