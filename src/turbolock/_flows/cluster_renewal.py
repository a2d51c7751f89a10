"""A renewal round's scripts on Redis Cluster, written once for threads and asyncio.

Each batch of the round (up to ``RENEW_CHUNK`` leases of one ttl) is split by master, and every
master gets its parts pipelined, all masters at once: one ``RENEW_MANY_ARGV`` call per part,
keys in ARGV (declared keys of several slots fail with CROSSSLOT, even on one node). A key the
node does not serve (its slot moving or moved) is answered -1 and redone alone, with a declared
key, following redirects (``many_flow``), after a read of the map (a reshard moves many slots:
one read, not a ``MOVED`` round trip a slot); a part the node refuses as a whole (TRYAGAIN,
CLUSTERDOWN) is redone key by key the same way, as soon as that master has answered (each
master's part is a flow of its own), and what that leaves undecided again while the round has
time; renewing a key twice is harmless. A master that cannot be
reached leaves its leases undecided (``NOT_SENT``, or ``UNKNOWN`` when
the connection broke after the write) and the renewer retries them; the other masters' leases
are renewed all the same.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from turbolock._flows.asking import turn_deadline
from turbolock._flows.cluster_routes import RETRY_PAUSE, ClusterRoutes, final, many_flow
from turbolock._flows.steps import Call, CallStep, Flow, Gather, Sleep
from turbolock._wire.outcomes import NOT_SENT, UNKNOWN, failures, item_encoders, with_failures
from turbolock._wire.scripts import RENEW_MANY, RENEW_MANY_ARGV
from turbolock._wire.slot_map import Address
from turbolock.errors import LockError, ReplyError
from turbolock.lease import Lease, keys_of

log = logging.getLogger("turbolock.renewal")

NOT_HERE = -1
"""``RENEW_MANY_ARGV``'s answer for a key its node does not serve (a slot moving): redone alone."""

Part = tuple[int, list[int]]
"""A batch's leases served by one master: (batch index, positions in the batch)."""


def renew_flow(routes: ClusterRoutes, nodes: Any, batches: Sequence[tuple[int, list[Lease]]], timeout: float,
               chunk_size: int, deadline: float) -> Flow[list[list[object]]]:
    """Per batch, a failures-only reply as ``RENEW_MANY`` gives one server (``outcomes.failures``):
    the outcome of each lease not renewed, 0 not ours, else undecided. Each master's part runs
    on its own (``_master_flow``), all at once: a master's keys to redo go as soon as that
    master has answered, not after the slowest one (a stalled master took the whole round)."""
    outcomes: list[list[object]] = [[NOT_SENT] * len(leases) for _, leases in batches]
    if routes.map is None or routes.stale:
        try:
            yield Call(nodes.refresh, (deadline,))
        except LockError as exc:
            log.warning("turbolock: no slot map for the renewal round: %s", exc)
            return [with_failures(batch) for batch in outcomes]
    flows = [_master_flow(routes, nodes, address, parts, batches, outcomes, timeout, chunk_size, deadline)
             for address, parts in _parts(routes, batches).items()]
    if len(flows) == 1:
        yield from flows[0]
    elif flows:
        ended = yield Gather(tuple(Call(nodes.drive, (flow,)) for flow in flows))
        for ok, value in ended:
            if not ok:  # its leases not yet settled stay undecided: the renewer retries them
                log.warning("turbolock: renewal on a master failed: %r", value)
    return [with_failures(batch) for batch in outcomes]


def _master_flow(routes: ClusterRoutes, nodes: Any, address: Address, parts: list[Part],
                 batches: Sequence[tuple[int, list[Lease]]], outcomes: list[list[object]], timeout: float,
                 chunk_size: int, deadline: float) -> Flow[None]:
    """One master's parts of the round into ``outcomes``, then its keys that went elsewhere
    (answered -1, or refused as a whole) redone key by key."""
    try:
        sent: list[object] = yield _node_call(routes, nodes, address, parts, batches, deadline)
    except Exception as exc:  # the master could not be reached: its leases stay undecided
        replies = _node_replies(routes, address, parts, False, exc)
    else:
        replies = _node_replies(routes, address, parts, True, sent)
    redo: list[tuple[int, int]] = []
    for (b, positions), reply in zip(parts, replies, strict=True):
        failed = failures(reply, len(positions))
        if failed is not None:
            settled: list[object] = [1] * len(positions)
            for at, outcome in failed:
                if outcome == NOT_HERE:
                    settled[at] = NOT_SENT
                    redo.append((b, positions[at]))
                    routes.stale = True  # slots moved: the redo reads the map first, not a MOVED a slot
                else:
                    settled[at] = outcome
            for position, outcome in zip(positions, settled, strict=True):
                outcomes[b][position] = outcome
        elif reply is UNKNOWN or reply is NOT_SENT:
            for position in positions:
                outcomes[b][position] = reply
        else:  # refused as a whole: a slot moved, or the cluster is changing
            routes.stale = True
            redo.extend((b, position) for position in positions)
    if redo:
        yield from _redo_flow(routes, nodes, redo, batches, outcomes, timeout, chunk_size, deadline)


def _redo_flow(routes: ClusterRoutes, nodes: Any, redo: list[tuple[int, int]],
               batches: Sequence[tuple[int, list[Lease]]], outcomes: list[list[object]], timeout: float,
               chunk_size: int, deadline: float) -> Flow[None]:
    """``redo`` key by key into ``outcomes``; the keys left undecided (the map could not be read,
    a node they went to could not be reached) again after a pause, while the round has time. The
    renewer's own retry comes after the round, and a round with a stalled master waits for it
    until just before its locks' expiry: these would be lost with nothing tried again. Each try
    gets half the time left (a map read that meets the stalled master, as its last candidate,
    waited for it until the round's end), the last one all of it."""
    while True:
        last = time.monotonic() + 2 * RETRY_PAUSE >= deadline
        until = deadline if last else turn_deadline(deadline, 0, 2)
        redone = yield from _key_by_key_flow(routes, nodes, redo, batches, timeout, chunk_size, until)
        again: list[tuple[int, int]] = []
        for (b, position), outcome in zip(redo, redone, strict=True):
            if type(outcome) is int or outcomes[b][position] is not UNKNOWN:
                # Once sent without a reply it stays UNKNOWN, whatever a later try met: that
                # renewal may still run, so a lock then lost is released in the background.
                outcomes[b][position] = outcome
            if type(outcome) is not int and (type(outcome) is not ReplyError or not final(outcome)):
                again.append((b, position))  # a refusal of the key itself (WRONGTYPE...) stands
        if not again or last or time.monotonic() + RETRY_PAUSE >= deadline:
            return
        yield Sleep(RETRY_PAUSE)
        redo = again


def _parts(routes: ClusterRoutes, batches: Sequence[tuple[int, list[Lease]]]) -> dict[Address, list[Part]]:
    """Each master's parts of the batches; leases of a slot no master serves are left out (undecided)."""
    slot_map = routes.map
    assert slot_map is not None
    node_of = slot_map.node_of
    parts: dict[Address, list[Part]] = {}
    for b, (_, leases) in enumerate(batches):
        by_node: dict[Address, list[int]] = {}
        slots = routes.key_slots(routes.key_prefix, keys_of(leases, routes.core))
        for position, slot in enumerate(slots):
            address = node_of(slot)
            if address is not None:
                by_node.setdefault(address, []).append(position)
        for address, positions in by_node.items():
            parts.setdefault(address, []).append((b, positions))
    return parts


def _node_call(routes: ClusterRoutes, nodes: Any, address: Address, parts: list[Part],
               batches: Sequence[tuple[int, list[Lease]]], deadline: float) -> CallStep:
    prefix = routes.key_prefix

    def append(buf: Any, index: int) -> None:
        b, positions = parts[index]
        ttl_ms, leases = batches[b]
        args = [b"EVALSHA", RENEW_MANY_ARGV.sha, b"0", b"%d" % ttl_ms]
        for position in positions:
            lease = leases[position]
            args.append(prefix + lease.key)
            args.append(lease.token)
        buf.append_command(tuple(args))

    encode, reencode = item_encoders(append)
    return Call(nodes.node(address).many, (len(parts), encode, RENEW_MANY_ARGV, reencode),
                {"deadline": deadline})


def _node_replies(routes: ClusterRoutes, address: Address, parts: list[Part], ok: bool,
                  value: Any) -> list[object]:
    """A master's replies to its parts; none sent when it could not be reached."""
    if not ok:
        routes.failed(address, value)
        log.warning("turbolock: renewal on %s:%d could not be sent: %s", address[0], address[1], value)
        return [NOT_SENT] * len(parts)
    if any(reply is UNKNOWN for reply in value):
        routes.failed(address)  # a failover, perhaps: read the map again before the next call
    return list(value)


def _key_by_key_flow(routes: ClusterRoutes, nodes: Any, items: list[tuple[int, int]],
                     batches: Sequence[tuple[int, list[Lease]]], timeout: float, chunk_size: int,
                     deadline: float) -> Flow[list[object]]:
    leases = [batches[b][1][position] for b, position in items]

    def append(buf: Any, index: int) -> None:
        lease = leases[index]
        buf.append_evalsha_multikey(RENEW_MANY.sha, [lease.key], [lease.token], batches[items[index][0]][0])

    encode, reencode = item_encoders(append)

    try:
        replies = yield from many_flow(routes, nodes, len(items), encode, RENEW_MANY, reencode,
                                       keys_of(leases, routes.core), timeout, chunk_size, deadline)
    except LockError as exc:
        log.warning("turbolock: renewal of %d locks key by key failed: %s", len(items), exc)
        return [NOT_SENT] * len(items)
    outcomes = [_alone(reply) for reply in replies]
    undecided = [outcome for outcome in outcomes if type(outcome) is not int]
    if undecided:  # retried by the renewer; what they got says why, if it goes on until expiry
        why = sorted({str(o) if isinstance(o, Exception) else repr(o) for o in undecided})
        log.info("turbolock: renewal of %d of %d locks redone key by key went undecided (%s)",
                 len(undecided), len(items), ", ".join(why[:5]))
    return outcomes


def _alone(reply: object) -> object:
    """One key's outcome from its own ``RENEW_MANY`` call: 1 renewed, or what failed."""
    failed = failures(reply, 1)
    if failed is None:
        return UNKNOWN if type(reply) is list else reply
    return failed[0][1] if failed else 1
