"""Claims (``acquire_many(..., limit=k)``) on Redis Cluster, written once for threads and asyncio.

The claim script takes free names in order until it has the number wanted; its keys must be
local to the node that runs it, and declared keys of several slots fail with CROSSSLOT. So the
names are grouped by master, and the masters are claimed from in turn, from a random one (as a
claim on one server starts at a random name), each with the standard claim plan over its own
names, keys in ARGV, for the number still wanted. A claim that fails part-way gives back what
every master gave it, as on one server. A master that no longer serves some of its names (the
map changed: a slot moved, a failover made it a replica) refuses with an error, having given
back what that master's part took: the map is read again and those names are claimed from
their masters now, at most ``REMAPS`` times; a slot still moving mid-chunk fails with the
node's error (the caller claims again).
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Sequence
from typing import Any

from turbolock._flows.bulk_flows import CLAIM_LOST, claim_plan_flow, run_release_flow
from turbolock._flows.bulk_plan import check_tokens, encode_unique_names
from turbolock._flows.claim import ClaimPlan, ClaimResult, check_limit
from turbolock._flows.client_settings import acquire_lost_error, check_fenced_keys
from turbolock._flows.cluster_routes import RETRY_PAUSE
from turbolock._flows.steps import Call, Flow, Sleep
from turbolock._wire.scripts import CLAIMED_FENCE, Script
from turbolock._wire.validate import Seconds, ttl_ms
from turbolock.errors import (
    AcquireOutcomeUnknownError,
    ClientClosedError,
    ClusterError,
    ConnectionError,
    LockError,
    ReplyError,
    ResponseError,
)
from turbolock.lease import Lease

REMAPS = 3
"""How many times one claim reads the map again after a master refused names it no longer serves."""

# CLAIM with keys in ARGV: ARGV[1] = ttl in ms, ARGV[2] = how many to take at most, ARGV[3] = '1'
# for fenced, ARGV[2 + 2i] = a key, ARGV[3 + 2i] its token. Replies the 0-based indices of the
# keys it took, in order (fenced: each followed by its fence, from a counter in the key's slot).
CLAIM_ARGV = Script("claim_argv", CLAIMED_FENCE + b"""\
local call = redis.call
local ttl = ARGV[1]
local want = tonumber(ARGV[2])
local fenced = ARGV[3] == '1'
local taken = {}
local count = 0
for i = 1, (#ARGV - 3) / 2 do
  local key = ARGV[2 + 2 * i]
  if call('set', key, ARGV[3 + 2 * i], 'NX', 'PX', ttl) then
    taken[#taken + 1] = i - 1
    if fenced then
      taken[#taken + 1] = claimed_fence('', key, i - 1)
    end
    count = count + 1
    if count == want then
      break
    end
  end
end
return taken
""")


class NodeClaimPlan(ClaimPlan):
    """A claim plan over one master's names, its chunks in the ARGV form. A chunk the cluster
    refused as down (a master failed and not yet replaced) took nothing: it is sent again,
    every ``RETRY_PAUSE``, for up to ``timeout`` seconds, as a refused command is."""

    script = CLAIM_ARGV
    _resend_until = 0.0

    def __init__(self, *args: Any, timeout: float, until: float = math.inf, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout = timeout
        self.until = until  # the whole claim's budget: no resend is sent past it

    def next_chunk(self) -> None:
        super().next_chunk()
        self._resend_until = min(time.monotonic() + self.timeout, self.until)

    def resend_pause(self, reply: object) -> float | None:
        if _cluster_down(reply) and time.monotonic() + RETRY_PAUSE < self._resend_until:
            return RETRY_PAUSE
        return None

    def ran_none(self, reply: object) -> bool:
        return _cluster_down(reply) or super().ran_none(reply)

    def error(self, reply: object) -> LockError:
        if _cluster_down(reply):  # as any call refused with CLUSTERDOWN to its deadline
            reply = ReplyError(f"CLUSTERDOWN {reply}")
        return super().error(reply)

    def encode(self, buf: Any, start: int = 0, stop: int = 1) -> None:
        prefix: bytes = buf.key_prefix
        keys = self.keys
        args: list[Any] = [b"EVALSHA", CLAIM_ARGV.sha, b"0", self.ttl_ms, self._wanted,
                           b"1" if self.fenced else b"0"]
        for i, token in zip(self._chunk, self._chunk_tokens, strict=True):
            args.append(prefix + keys[i])
            args.append(token)
        buf.append_command(tuple(args))


class ClusterClaimResult(ClaimResult):
    """A claim's result over several masters: ``not_tried`` is the names of the masters (and
    the parts of them) the claim did not reach."""

    __slots__ = ("_not_tried",)

    def __init__(self, names: list[str | bytes], leases: list[Lease | None], not_acquired: list[str | bytes],
                 acquired: list[Lease], not_tried: list[int]) -> None:
        super().__init__(names, leases, not_acquired, acquired, (0, len(names)))
        self._not_tried = not_tried

    @property
    def not_tried(self) -> list[str | bytes]:
        names = self.names
        return [names[i] for i in sorted(self._not_tried)]


def cluster_claim_flow(client: Any, names: Sequence[str | bytes], ttl: Seconds, limit: int,
                       tokens: Sequence[bytes] | None, fenced: bool = False) -> Flow[ClaimResult]:
    """At most ``limit`` free locks of ``names``, master by master (``client._cluster``);
    ``fenced``: each lock taken comes with its fence."""
    keys = encode_unique_names(names, client.core)  # every argument checked before anything is sent
    ms = ttl_ms(ttl)
    wanted = check_limit(limit)
    checked = None if tokens is None else check_tokens(tokens, len(keys))
    fenced = check_fenced_keys(fenced, client.key_prefix, keys, 0)
    cluster = client._cluster
    routes = cluster.routes
    # The budget of a bulk call, map reads included: ``timeout`` per chunk of its names.
    end = time.monotonic() + cluster.timeout * max(1, math.ceil(len(keys) / client.chunk_size))
    groups = routes.groups(range(len(keys)), keys)
    if groups is None:
        yield Call(cluster.refresh, (min(end, time.monotonic() + cluster.timeout),))
        groups = routes.groups(range(len(keys)), keys)
        if groups is None:
            raise ClusterError("some slots have no master: the cluster is down or being changed")
    order = list(groups)
    first = secrets.randbelow(len(order)) if order else 0
    queue = [(address, groups[address]) for address in order[first:] + order[:first]]
    leases: list[Lease | None] = [None] * len(keys)
    acquired: list[Lease] = []
    not_acquired: list[int] = []
    not_tried: list[int] = []
    remaps = 0
    try:
        while queue:
            address, indices = queue.pop(0)
            if len(acquired) >= wanted:
                not_tried.extend(indices)
                continue
            plan = NodeClaimPlan([names[i] for i in indices], ms, wanted - len(acquired),
                                 None if checked is None else [checked[i] for i in indices], client._owner,
                                 client.chunk_size, fenced=fenced, core=client.core, timeout=cluster.timeout,
                                 until=end)
            try:
                part = yield from claim_plan_flow(client, plan, cluster.node(address).many, end)
            except ResponseError as error:
                # Caller-given tokens are not claimed again: the part's locks, given back in the
                # background with them, could then delete a lock claimed again with the same token.
                if not _not_served(error) or remaps >= REMAPS or checked is not None:
                    raise
                remaps += 1
                routes.stale = True
                yield Call(cluster.refresh, (min(end, time.monotonic() + cluster.timeout),))
                if not (yield from _released(client, plan, min(end, time.monotonic() + cluster.timeout))):
                    raise error
                regrouped = routes.groups(indices, keys)
                while regrouped is None and remaps < REMAPS:  # the node read had not yet heard of the move
                    remaps += 1
                    yield Sleep(RETRY_PAUSE)
                    routes.stale = True
                    yield Call(cluster.refresh, (min(end, time.monotonic() + cluster.timeout),))
                    regrouped = routes.groups(indices, keys)
                if regrouped is None:
                    raise ClusterError("some slots have no master: the cluster is being changed") from None
                queue[:0] = list(regrouped.items())
                continue
            for position, lease in enumerate(part.leases):
                if lease is not None:
                    leases[indices[position]] = lease
                    acquired.append(lease)
            held = set(part.not_acquired)
            untried = set(part.not_tried)
            for position, name in enumerate(plan.names):
                if name in held:
                    not_acquired.append(indices[position])
                elif name in untried:
                    not_tried.append(indices[position])
    except BaseException as error:  # what the masters before gave is given back too
        forget_at = time.monotonic() + ms / 1000.0
        for lease in acquired:
            client._remember_cleanup(lease.key, lease.token, forget_at)
        if isinstance(error, AcquireOutcomeUnknownError):  # named with them, as on one server
            unasked = [names[i] for _, indices in queue for i in indices]
            raise _with_given_back(error, [lease.name for lease in acquired], unasked,
                                   client._closed) from error.__cause__
        raise
    names_list = list(names)
    in_order = [lease for lease in leases if lease is not None]  # as one server's claim: input order
    return ClusterClaimResult(names_list, leases, [names_list[i] for i in sorted(not_acquired)], in_order,
                              not_tried)


def _released(client: Any, plan: NodeClaimPlan, deadline: float) -> Flow[bool]:
    """Release now what a refused part took, given back in the background (claimed again at
    once, those names would count as held by others); True when every release was answered,
    and those are no longer owed."""
    now = time.monotonic()
    locks = plan.held(now) + plan.maybe_held(now)
    keys, tokens = [lock[1] for lock in locks], [lock[2] for lock in locks]
    try:
        replies = yield from run_release_flow(client, keys, tokens, deadline)
    except Exception:  # owed still, in the background
        return False
    if not all(type(reply) is int for reply in replies):
        return False
    for key, token in zip(keys, tokens, strict=True):
        client._cleanup.drop(key, token)
    return True


def _cluster_down(reply: object) -> bool:
    """Whether ``reply`` is a script's refusal to run a command while the cluster is down: the
    claim script's first command, since the cluster's state cannot change while a script runs."""
    return type(reply) is ReplyError and reply.code == "ERR" and "while the cluster is down" in str(reply)


def _not_served(error: ResponseError) -> bool:
    """Whether a master refused a claim because it no longer serves some of its names: a
    replica now (READONLY), or a key of a slot it lost ("non local key", keys in ARGV)."""
    return error.code == "READONLY" or (error.code == "ERR" and "non local key" in str(error))


def _with_given_back(error: AcquireOutcomeUnknownError, given_back: list[str | bytes],
                     unasked: list[str | bytes], closed: bool) -> AcquireOutcomeUnknownError:
    """``error`` of one master's lost claim reply, also naming the locks the masters before
    took (given back; left to their ttl when the client was ``closed`` meanwhile) and, in
    ``not_sent``, the names of the masters after it."""
    if not given_back and not unasked:
        return error
    cause = ClientClosedError() if closed else ConnectionError(CLAIM_LOST)
    whole = acquire_lost_error([*given_back, *error.names], cause)
    whole.not_sent = [*error.not_sent, *unasked]
    return whole
