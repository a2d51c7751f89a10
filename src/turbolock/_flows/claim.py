"""Claiming at most k free locks out of many names: the script, the result and the plan, sans-IO.

A pool of workers over shared shards each wants a few of them, not all: ``acquire_many`` would
hand every free shard to whoever asks first. A claim walks the names from a random starting
point (so workers spread over the input instead of all contending for the first names), one
``EVALSHA`` per chunk. The script takes free keys in order and stops after the number still
wanted, so a chunk never takes more than the caller asked for, and it answers with the few
indices it took, not one reply per key. One chunk is in flight at a time: the next chunk's
limit depends on the previous reply. A chunk sends twice as many names as are still wanted,
more when names were found held, up to ``chunk_size``: the server parses every name sent.

A claim that fails part-way gives everything back: the leases it took and the chunk whose reply
was lost are released with their tokens in the background, and the caller holds nothing from
that call.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from turbolock._flows.bulk_plan import batch_tokens, check_tokens, encode_unique_names
from turbolock._flows.bulk_result import AcquireManyResult
from turbolock._wire.replies import NOT_RUN, reply_error
from turbolock._wire.scripts import CLAIMED_FENCE, Script, fence_counter
from turbolock.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockError,
    ReplyError,
    ResponseError,
)
from turbolock.lease import FencedLease, Lease

# KEYS = lock keys, in the order to try them; ARGV[1] = ttl in ms, ARGV[2] = how many to take at
# most, ARGV[3] = the fence counter when fenced (``scripts.fence_counter``), else empty,
# ARGV[3 + i] = the token of KEYS[i]. Replies the 0-based indices
# of the keys it took, in order (fenced: each followed by its fence); it stops right after the
# last one wanted, so keys after it were not tried.
CLAIM = Script("claim", CLAIMED_FENCE + b"""\
local call = redis.call
local ttl = ARGV[1]
local want = tonumber(ARGV[2])
local counter = ARGV[3]
local fenced = counter ~= ''
local taken = {}
local count = 0
for i = 1, #KEYS do
  if call('set', KEYS[i], ARGV[i + 3], 'NX', 'PX', ttl) then
    taken[#taken + 1] = i - 1
    if fenced then
      taken[#taken + 1] = claimed_fence(counter, KEYS[i], i - 1)
    end
    count = count + 1
    if count == want then
      break
    end
  end
end
return taken
""")

MaybeHeld = tuple[str | bytes, bytes, bytes, float]
"""(name, key, token, forget_at) of a lock to release with its token, until ``forget_at``."""


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidArgumentTypeError("limit", f"must be an int, not {type(limit).__name__}")
    if limit < 1:
        raise InvalidArgumentError("limit", f"must be at least 1, not {limit}")
    return limit


def random_start(count: int) -> int:
    # secrets, not random: forked workers must not share a generator's state.
    return secrets.randbelow(count) if count else 0


def window(count: int, start: int, lo: int, hi: int) -> list[int]:
    """Input indices at positions ``lo``..``hi`` of the input rotated to begin at ``start``."""
    a, b = start + lo, start + hi
    return [*range(a, min(b, count)), *range(max(a, count) - count, max(b - count, 0))]


class ClaimResult(AcquireManyResult):
    """An ``AcquireManyResult`` of a claim: ``leases`` has one entry per name in input order,
    ``not_acquired`` lists the names found held by others and ``not_tried`` the names left
    untried because the limit was reached first (both in input order). Every name is in exactly
    one of ``acquired``, ``not_acquired`` and ``not_tried``."""

    __slots__ = ("_acquired", "_untried")

    def __init__(self, names: list[str | bytes], leases: list[Lease | None], not_acquired: list[str | bytes],
                 acquired: list[Lease], untried: tuple[int, int]) -> None:
        super().__init__(names, leases, not_acquired)
        self._acquired = acquired
        self._untried = untried

    @property
    def acquired(self) -> list[Lease]:
        return list(self._acquired)  # a few leases, not a scan of every name

    @property
    def not_tried(self) -> list[str | bytes]:
        # Worked out on demand: a claim of a few names out of very many rarely asks.
        start, tried = self._untried
        names = self.names
        return [names[i] for i in sorted(window(len(names), start, tried, len(names)))]

    def __repr__(self) -> str:
        return (f"ClaimResult(requested={len(self.leases)}, acquired={len(self.acquired)}, "
                f"not_acquired={len(self.not_acquired)}, not_tried={len(self.not_tried)})")


class ClaimPlan:
    """One claim, minus the sending. The driver loops: ``next_chunk()``, sets ``sent_at``, sends
    ``encode`` (``reencode`` after NOSCRIPT) as one command, then ``settle(reply)``, until
    ``finished``; a chunk it could not settle goes back with ``held()`` and ``maybe_held()``."""

    script = CLAIM

    def __init__(self, names: Sequence[str | bytes], ttl_ms: int, limit: object,
                 tokens: Sequence[bytes] | None, owner: object, chunk_size: int,
                 start: int | None = None, fenced: bool = False, core: Any = None) -> None:
        """``core``: the client's, whose one pass checks the names (the pure core's when None)."""
        self.keys = encode_unique_names(names, core)
        self.names = list(names)
        self.count = count = len(self.keys)
        self.limit = check_limit(limit)
        self.tokens = None if tokens is None else check_tokens(tokens, count)
        self.ttl_ms = ttl_ms
        self.fenced = fenced
        """Whether each lock taken gets a fence (``FencedLease``): the reply then pairs each index
        with its fence."""
        self.owner = owner
        self.chunk_size = chunk_size
        self.start = random_start(count) if start is None else start % max(count, 1)
        self.leases: list[Lease | None] = [None] * count
        self.taken = 0
        self.tried = 0
        """Positions (in the rotated order) settled so far."""
        self.sent_at = 0.0
        """Set by the driver right before the chunk's command is written."""
        self._mine: dict[int, Lease] = {}
        self._held_elsewhere: list[int] = []
        self._chunk: list[int] = []
        self._chunk_tokens: list[bytes] = []
        self._wanted = 0

    @property
    def finished(self) -> bool:
        return self.taken >= self.limit or self.tried >= self.count

    def next_chunk(self) -> None:
        """Pick the next names to try, with their tokens, and how many of them to take at most."""
        lo = self.tried
        self._chunk = chunk = window(self.count, self.start, lo, lo + self._span())
        if self.tokens is None:
            self._chunk_tokens = batch_tokens(len(chunk))
        else:
            tokens = self.tokens
            self._chunk_tokens = [tokens[i] for i in chunk]
        self._wanted = min(self.limit - self.taken, len(chunk))

    def _span(self) -> int:
        """How many names the next chunk sends: twice as many as are still wanted, scaled up by
        the share of names found held so far, at most ``chunk_size``. The server parses every
        name sent, but a name costs far less than another round trip."""
        wanted = self.limit - self.taken
        estimate = -(-2 * wanted * (self.tried + 1) // (self.taken + 1))
        return min(self.chunk_size, self.count - self.tried, estimate)

    def encode(self, buf: Any, start: int = 0, stop: int = 1) -> None:
        """The chunk as one command (an ``Encoder`` of one item for ``Executor.many``)."""
        prefix: bytes = buf.key_prefix
        keys = self.keys
        chunk_keys = [prefix + keys[i] for i in self._chunk]
        buf.append_command((b"EVALSHA", CLAIM.sha, len(chunk_keys), *chunk_keys,
                            self.ttl_ms, self._wanted, fence_counter(prefix) if self.fenced else b"",
                            *self._chunk_tokens))

    def reencode(self, buf: Any, indices: Sequence[int]) -> None:
        """The same chunk again, same tokens and limit (a ``Reencoder``, after NOSCRIPT)."""
        self.encode(buf)

    def resend_pause(self, reply: object) -> float | None:
        """How long to wait before sending the chunk again, when ``reply`` says the server ran
        none of it and may soon (a Redis Cluster's ``NodeClaimPlan``); None: settle it."""
        return None

    def ran_none(self, reply: object) -> bool:
        """Whether ``reply`` is a refusal of the chunk before it ran: it took nothing."""
        return type(reply) is ReplyError and reply.code in NOT_RUN

    def settle(self, reply: object) -> bool:
        """Leases for what the chunk took; False when the reply does not say (an error reply),
        and then nothing is recorded: the chunk may hold anything up to its limit."""
        chunk = self._chunk
        if type(reply) is not list:
            return False
        if self.fenced:
            taken, fences = reply[0::2], reply[1::2]
            if len(taken) != len(fences) or not all(type(f) is int and f > 0 for f in fences):
                return False
        else:
            taken, fences = reply, []
        if not _valid_indices(taken, len(chunk), self._wanted):
            return False
        names, tokens, leases = self.names, self._chunk_tokens, self.leases
        ttl, sent_at, owner = self.ttl_ms, self.sent_at, self.owner
        for n, j in enumerate(taken):
            i = chunk[j]
            lease = (FencedLease(names[i], tokens[j], ttl, sent_at, owner, fences[n]) if fences
                     else Lease(names[i], tokens[j], ttl, sent_at, owner))
            leases[i] = self._mine[i] = lease
        # The script stops right after the last name wanted: the names before that point it did
        # not take are held by others, the names after it were not tried.
        stop = taken[-1] + 1 if taken and len(taken) == self._wanted else len(chunk)
        mine = set(taken)
        self._held_elsewhere.extend(chunk[j] for j in range(stop) if j not in mine)
        self.taken += len(taken)
        self.tried += stop
        return True

    def error(self, reply: object) -> LockError:
        """The exception for a reply ``settle`` refused, naming the lock whose counter failed
        when that was it (``claimed_fence``), else every lock of the chunk's call."""
        name = self.names[self._chunk[0]]
        if isinstance(reply, list):
            return ResponseError(f"unexpected reply to the claim of {name!r} and the names after it")
        if type(reply) is ReplyError and reply.code == "FENCE":
            _, at, message = [*str(reply).split(" ", 2), "", ""][:3]
            if at.isdigit() and int(at) < len(self._chunk):
                return reply_error(ReplyError(message), self.names[self._chunk[int(at)]])
        return reply_error(reply, name, [self.names[i] for i in self._chunk])

    def held(self, now: float) -> list[MaybeHeld]:
        """Every lock this claim took so far, to give back when it fails at ``now``."""
        forget_at = now + self.ttl_ms / 1000.0
        return [(lease.name, lease.key, lease.token, forget_at) for lease in self._mine.values()]

    def maybe_held(self, now: float) -> list[MaybeHeld]:
        """Every lock of the chunk whose reply was lost (or unreadable) at ``now``: it may have
        taken any of them. Its key has certainly expired a ttl after the server ran it."""
        names, keys = self.names, self.keys
        forget_at = now + self.ttl_ms / 1000.0
        return [(names[i], keys[i], token, forget_at)
                for i, token in zip(self._chunk, self._chunk_tokens, strict=True)]

    def not_sent(self, chunk_sent: bool) -> list[str | bytes]:
        """Names never sent when the claim stopped at the current chunk, in input order."""
        lo = self.tried + (len(self._chunk) if chunk_sent else 0)
        return [self.names[i] for i in sorted(window(self.count, self.start, lo, self.count))]

    def result(self) -> ClaimResult:
        names, mine = self.names, self._mine
        return ClaimResult(names, self.leases, [names[i] for i in sorted(self._held_elsewhere)],
                           [mine[i] for i in sorted(mine)], (self.start, self.tried))


def _valid_indices(reply: object, size: int, wanted: int) -> bool:
    if type(reply) is not list or len(reply) > wanted:
        return False
    previous = -1
    for j in reply:
        if type(j) is not int or not previous < j < size:
            return False
        previous = j
    return True


def check_claim(limit: object, all_or_nothing: bool) -> None:
    """``limit`` takes free names until it has that many: "all or nothing" means nothing there."""
    if all_or_nothing:
        raise InvalidArgumentError("all_or_nothing", f"cannot be combined with limit={limit!r}")
