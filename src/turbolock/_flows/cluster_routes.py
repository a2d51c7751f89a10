"""Redis Cluster routing, written once for threads and asyncio: which master each key's command
goes to, and what to do with a reply that says it went to the wrong one.

The slot map comes from ``CLUSTER SHARDS`` (``CLUSTER SLOTS`` on older servers), asked of the
known masters, then of the start-up nodes. A ``MOVED`` reply updates the map and the command
goes again to the new master; ``ASK`` sends it once to the importing node after ``ASKING``;
``TRYAGAIN`` and ``CLUSTERDOWN`` wait a little and try again; all within the call's deadline. A
connection error fails the call with its typed error, as on one server, and marks the map stale:
the next call reads it again, and after a failover finds the promoted replica.

The flows here yield calls on ``nodes`` (``_sync.cluster.ClusterExecutor`` or its asyncio twin):
``nodes.node(address)`` is the ``Server`` of one node, ``nodes.refresh(deadline)`` reads the map
(one refresh at a time, which is the driver's to enforce).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from turbolock._flows.asking import turn_deadline
from turbolock._flows.bulk_plan import OrphanTags, subset_orphans
from turbolock._flows.steps import Call, CallStep, Flow, Gather, Sleep
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import (
    NOT_SENT,
    UNKNOWN,
    Encoder,
    Reencoder,
    ReplyHandler,
    Unconfirmed,
    bulk_budget,
    subset_encoders,
)
from turbolock._wire.slot_map import Address, Redirect, SlotMap, map_from_shards, map_from_slots, redirect_of
from turbolock._wire.slots import key_slot
from turbolock.errors import (
    AuthenticationError,
    ClientClosedError,
    ClusterError,
    ConnectionError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    ProtocolError,
    ReplyError,
    TimeoutError,
    UnsentTimeoutError,
)
from turbolock.options import ConnectionOptions, node_address

MAX_REDIRECTS = 5
"""Redirects one command follows at once; after that, one per ``RETRY_PAUSE`` until its deadline."""
RETRY_PAUSE = 0.02
"""Pause before sending again after TRYAGAIN or CLUSTERDOWN."""
_REDIRECTED = object()
"""What a pause after ``MAX_REDIRECTS`` followed (``one_key_flow``)."""
MAP_MAX_AGE = 60.0
"""Seconds after which the next call reads the slot map again, even with no MOVED or failure to
say it changed (replicas added or moved, a failover none of this client's calls met): the slow
refresh, done by a call instead of a thread of its own."""


def startup_addresses(startup_nodes: object) -> list[Address]:
    """A cluster client's extra start-up nodes, checked before anything is sent."""
    if isinstance(startup_nodes, str | bytes) or not isinstance(startup_nodes, Sequence):
        raise InvalidArgumentTypeError("startup_nodes", "must be a list of URLs or (host, port) pairs")
    return [node_address(node, "startup_nodes") for node in startup_nodes]


def cluster_startup(options: ConnectionOptions, startup: Sequence[Address]) -> list[Address]:
    """Every start-up node (the client's own host first), refusing settings a cluster cannot have."""
    if options.unix_socket_path is not None:
        raise InvalidArgumentError("unix_socket_path", "a Redis Cluster is reached over TCP")
    if options.db != 0:
        raise InvalidArgumentError("db", "Redis Cluster has database 0 only")
    return [(options.host, options.port), *startup]


def retry_later(reply: object) -> bool:
    return type(reply) is ReplyError and reply.code in ("TRYAGAIN", "CLUSTERDOWN")


def final(reply: object) -> bool:
    """Whether a reply is the command's outcome, not a redirect or a "try again" (the drivers'
    fast path sends a key's command to the master the map names and returns such a reply; any
    other goes to ``one_key_flow`` as its ``first``)."""
    return type(reply) is not ReplyError or (reply.code != "MOVED" and reply.code != "ASK"
                                             and reply.code != "TRYAGAIN" and reply.code != "CLUSTERDOWN")


class ClusterRoutes:
    """The slot map a client believes, and whether it must be read again before the next call."""

    def __init__(self, key_prefix: bytes, startup: Sequence[Address], use_tls: bool,
                 core: Any) -> None:
        self.key_prefix = key_prefix
        self.core = core
        """The client's core: its ``key_slots(prefix, keys)`` gives the slot of each of many keys."""
        self.key_slots: Callable[[bytes, list[bytes]], list[int]] = core.key_slots
        self.startup = list(startup)
        self.use_tls = use_tls
        self.map: SlotMap | None = None
        self.stale = True
        self.max_age = MAP_MAX_AGE
        self._expires = 0.0
        self.suspects: set[Address] = set()
        """Nodes whose last call failed: asked for the map last, so one stopped master does not
        spend every later call's deadline (the map is read again after each such failure)."""
        self.ids: frozenset[str] = frozenset()
        """The node IDs of the last map installed: a map that shares none of them comes from
        another cluster (a start-up node of it, down when the first map was checked)."""

    def candidates(self) -> list[Address]:
        """Whom to ask for the map: the masters known, then the start-up nodes; suspects last."""
        known = self.map.masters if self.map is not None else []
        everyone = list(dict.fromkeys([*known, *self.startup]))
        return [a for a in everyone if a not in self.suspects] + [a for a in everyone if a in self.suspects]

    def failed(self, address: Address, error: BaseException | None = None) -> None:
        """A call to ``address`` failed: the map may be wrong (a failover), and that node is
        suspect. Not when ``error`` tells nothing of the node, a caller cancelled or interrupted
        (a cancel-heavy asyncio service would read the map again after every cancelled call).
        An ``UnsentTimeoutError`` does blame it: a connect to a frozen master ends that way."""
        if error is not None and not isinstance(error, Exception):
            return
        self.suspects.add(address)
        self.stale = True

    def install(self, reply: object, fallback: object, address: Address) -> SlotMap:
        """The map from a ``CLUSTER SHARDS`` reply (or, when the server did not know that
        command, ``fallback``: a ``CLUSTER SLOTS`` reply)."""
        host = address[0]
        if type(reply) is ReplyError:
            text = str(reply).lower()
            if "cluster support disabled" in text:
                raise ProtocolError(f"{host}:{address[1]} is not a Redis Cluster node "
                                    "(cluster support disabled)")
            if fallback is None or type(fallback) is ReplyError:
                raise ProtocolError(f"{host}:{address[1]} gave no slot map: {fallback or reply}")
            fresh = map_from_slots(fallback, host)
        else:
            fresh = map_from_shards(reply, host, self.use_tls)
        if not fresh.masters:
            raise ProtocolError(f"{host}:{address[1]} serves no slots (is the cluster created?)")
        if self.ids and fresh.ids and not self.ids & fresh.ids:
            raise ClusterError(f"{host}:{address[1]} belongs to another cluster than the one this client "
                               "uses (no node in common); give the nodes of one cluster")
        if fresh.ids:
            self.ids = fresh.ids
        self.map = fresh
        self.stale = False
        self._expires = time.monotonic() + self.max_age
        self.suspects.discard(address)
        return fresh

    def moved(self, changes: dict[int, Address]) -> None:
        """``MOVED`` replies (slot -> the address each named), all of one pass at once."""
        if self.map is not None:
            self.map = self.map.moved(changes)
        self.stale = True  # the rest of the map has probably moved too: read it before the next call

    def _must_read(self) -> bool:
        if not self.stale and time.monotonic() >= self._expires:
            self.stale = True
        return self.map is None or self.stale

    def master_of(self, key: bytes) -> Address | None:
        """The master of ``key``'s slot, or None while the map must be read (again)."""
        if self._must_read():
            return None
        assert self.map is not None
        return self.map.node_of(key_slot(self.key_prefix + key))

    def groups(self, indices: Sequence[int], keys: Sequence[bytes]) -> dict[Address, list[int]] | None:
        """The items of each master, in input order; None while the map must be read."""
        slot_map = self.map
        if slot_map is None or self._must_read():
            return None
        items = indices if type(indices) is list else list(indices)
        core = self.core
        all_keys = keys if type(keys) is list else list(keys)
        slots = self.key_slots(self.key_prefix, core.take_items(all_keys, items))
        return slot_map.group(items, slots, core.group_items)


def refresh_waited_too_long() -> ClusterError:
    """A call that waited for another call's read of the map (one at a time) until its own
    deadline: it ends there, whatever that read still takes."""
    return ClusterError("no slot map within the call's deadline: another call's read of it is still going on")


def refresh_flow(routes: ClusterRoutes, nodes: Any, deadline: float) -> Flow[SlotMap]:
    """Read the map from the first node that gives one (the first time, check that the other
    start-up nodes belong to that cluster)."""
    first = routes.map is None
    fresh = yield from _read_map_flow(routes, nodes, deadline)
    if first and len(routes.startup) > 1:
        yield from _same_cluster_flow(routes, nodes, fresh, deadline)
    return fresh


def _same_cluster_flow(routes: ClusterRoutes, nodes: Any, fresh: SlotMap, deadline: float) -> Flow[None]:
    """Each start-up node that answers must be a node of the cluster the map came from: two
    clusters' nodes given to one client would split its locks between them."""
    others = [address for address in routes.startup if fresh.ids and address not in fresh.masters]
    checks_end = turn_deadline(deadline, 0, 2)  # the other half is the call's own
    for position, address in enumerate(others):
        try:
            reply = yield Call(nodes.node(address).command_one,
                               ((b"CLUSTER", b"MYID"), turn_deadline(checks_end, position, len(others))))
        except (ConnectionError, ProtocolError):
            routes.suspects.add(address)
            continue  # down now: a map it gives later must share a node with this one (``install``)
        if type(reply) is bytes and reply.decode() in fresh.ids:
            continue
        routes.map, routes.stale = None, True
        node = f"start-up node {address[0]}:{address[1]}"
        if type(reply) is ReplyError:
            raise ClusterError(f"{node} is not a Redis Cluster node ({reply.code})")
        other = fresh.masters[0]
        raise ClusterError(f"{node} belongs to another cluster than {other[0]}:{other[1]}; give the "
                           "nodes of one cluster")


def _read_map_flow(routes: ClusterRoutes, nodes: Any, deadline: float) -> Flow[SlotMap]:
    errors: list[str] = []
    refused: AuthenticationError | None = None
    candidates = routes.candidates()
    for position, address in enumerate(candidates):
        if time.monotonic() >= deadline:
            break
        node = nodes.node(address)
        until = turn_deadline(deadline, position, len(candidates))
        try:
            reply = yield Call(node.command_one, ((b"CLUSTER", b"SHARDS"), until))
            fallback = None
            if type(reply) is ReplyError and "unknown" in str(reply).lower():
                fallback = yield Call(node.command_one, ((b"CLUSTER", b"SLOTS"), until))
            return routes.install(reply, fallback, address)
        except (ConnectionError, ProtocolError) as exc:
            routes.suspects.add(address)
            errors.append(f"{address[0]}:{address[1]}: {exc}")
            if isinstance(exc, AuthenticationError):
                refused = exc
    if refused is not None:  # the credentials, not the cluster: say so
        raise refused
    not_cluster = [error for error in errors if "not a Redis Cluster node" in error]
    if not_cluster and len(not_cluster) == len(errors):
        raise ProtocolError("; ".join(not_cluster))
    raise ClusterError("no cluster node gave a slot map" + (f" ({'; '.join(errors)})" if errors else ""))


def _master_flow(routes: ClusterRoutes, nodes: Any, key: bytes, deadline: float) -> Flow[Address]:
    address = routes.master_of(key)
    if address is None:
        yield Call(nodes.refresh, (deadline,))
        address = routes.master_of(key)
        if address is None:
            slot = key_slot(routes.key_prefix + key)
            raise ClusterError(f"no master serves slot {slot}: the cluster is down or being changed")
    return address


def one_key_flow(routes: ClusterRoutes, nodes: Any, key: bytes, send: Callable[[Any, float], Any],
                 ask: Callable[[Any, float], Any], deadline: float,
                 first: tuple[Address, object] | None = None) -> Flow[object]:
    """One command for one key: ``send(node, deadline)`` is the node's call to yield, ``ask``
    the same after ``ASKING``. Redirects are followed, at once ``MAX_REDIRECTS`` times, then
    (a key bouncing between two masters while a failover settles) after a pause and a fresh read
    of the map each, while the deadline allows; any other reply is the result. ``first``: the
    (master, reply) of a first try the driver made itself."""
    redirects = 0
    round_took = 0.0
    paused_on: object = None  # the refusal the last pause followed (_REDIRECTED or the reply)
    while True:
        if first is not None:
            address, reply = first
            first = None
        else:
            sent = yield from _send_flow(routes, nodes, key, send, deadline, paused_on, round_took)
            if sent is None:
                return _refused(paused_on, redirects)
            address, reply, round_took = sent
        paused_on = None
        redirect = redirect_of(reply, address[0])
        if redirect is not None and redirect.ask:
            # The importing node answers TRYAGAIN while it holds only some of a script's keys.
            reply = yield ask(nodes.node(redirect.address), deadline)
            redirect = _bounced(routes, reply, redirect.address)
        if redirect is not None:
            if not redirect.ask:
                routes.moved({redirect.slot: redirect.address})
            redirects += 1
            if redirects >= MAX_REDIRECTS:
                if time.monotonic() + RETRY_PAUSE >= deadline:
                    raise ClusterError(f"a key was redirected {redirects} times; the cluster keeps changing")
                routes.stale = True
                paused_on = _REDIRECTED
                yield Sleep(RETRY_PAUSE)
            continue
        if retry_later(reply) and time.monotonic() + RETRY_PAUSE < deadline:
            routes.stale = True
            paused_on = reply
            yield Sleep(RETRY_PAUSE)
            continue
        return reply


def _send_flow(routes: ClusterRoutes, nodes: Any, key: bytes, send: Callable[[Any, float], Any],
               deadline: float, paused_on: object, round_took: float
               ) -> Flow[tuple[Address, object, float] | None]:
    """The key's command sent to the master the map names: (master, reply, how long it took).
    After a refusal (``paused_on``), None when the resend no longer fits in the deadline (twice
    the last round ``round_took``: a busy host), checked before and after the map is read, when
    the deadline cut the map read, or when it passed before the write: a command refused for
    sure beats one the deadline would leave maybe-done, and the refusal stands."""
    def no_time() -> bool:
        return paused_on is not None and time.monotonic() + 2 * round_took >= deadline

    if no_time():
        return None
    try:
        address = yield from _master_flow(routes, nodes, key, deadline)
    except ClusterError:
        if paused_on is None or time.monotonic() + RETRY_PAUSE < deadline:
            raise  # an outage, not a map read the deadline cut
        return None
    if no_time():
        return None
    started = time.monotonic()
    try:
        reply = yield send(nodes.node(address), deadline)
    except UnsentTimeoutError:  # the deadline passed before the write: the node had no part in it
        if paused_on is None:
            raise
        return None
    except BaseException as exc:
        routes.failed(address, exc)  # a failover, perhaps: the map is read again before the next call
        raise
    return address, reply, time.monotonic() - started


def _refused(paused_on: object, redirects: int) -> object:
    """What a key's command comes to when no resend fits in its deadline after ``paused_on``:
    the last refusal (TRYAGAIN, CLUSTERDOWN: nothing ran), or too many redirects."""
    if paused_on is _REDIRECTED:
        raise ClusterError(f"a key was redirected {redirects} times; the cluster keeps changing")
    return paused_on


First = tuple[Address, object] | None
"""A driver's own first try of a key's command (see ``final``), or None."""


def set_nx_flow(routes: ClusterRoutes, nodes: Any, key: bytes, token: bytes, ttl_ms: int,
                deadline: float, first: First = None) -> Flow[object]:
    def append(buf: Any) -> None:
        buf.append_set_nx_px(key, token, ttl_ms)

    return one_key_flow(routes, nodes, key,
                        lambda node, end: Call(node.set_nx_one, (key, token, ttl_ms, end)),
                        lambda node, end: Call(node.asking_one, (append, end, None, True)), deadline, first)


def script_flow(routes: ClusterRoutes, nodes: Any, script: _scripts.Script, key: bytes, token: bytes,
                ttl_ms: int | None, deadline: float, first: First = None) -> Flow[object]:
    def append(buf: Any) -> None:
        script.append(buf, key, token, ttl_ms)

    return one_key_flow(routes, nodes, key,
                        lambda node, end: Call(node.script_one, (script, key, token, ttl_ms, end)),
                        lambda node, end: Call(node.asking_one, (append, end, script)), deadline, first)


def pttl_flow(routes: ClusterRoutes, nodes: Any, key: bytes, deadline: float,
              first: First = None) -> Flow[object]:
    def append(buf: Any) -> None:
        buf.append_pttl(key)

    try:
        return (yield from one_key_flow(routes, nodes, key, lambda node, end: Call(node.pttl_one, (key, end)),
                                        lambda node, end: Call(node.asking_one, (append, end, None)),
                                        deadline, first))
    except Unconfirmed as exc:  # a read: what was lost is just an error
        raise exc.cause from None


def many_flow(routes: ClusterRoutes, nodes: Any, count: int, encode: Encoder, script: _scripts.Script | None,
              reencode: Reencoder | None, keys: Sequence[bytes], timeout: float, chunk_size: int,
              deadline: float, orphans: Any = None, results: list[object] | None = None,
              durable: bool = False, read_only: bool = False) -> Flow[list[object]]:
    """A reply per item in input order: each master gets its items pipelined in chunks (a
    chunk's timeout each); items redirected or told to wait go again while time is left.
    ``read_only`` (queries: nothing to settle): a master that failed or timed out makes the call
    raise its error, even when the others answered.
    ``orphans`` (asyncio: the tags of a cancelled caller's acquires) go with each master's share.
    ``results`` (``count`` entries) is filled as replies come, so that a caller whose call fails
    on one master still sees what the others answered."""
    if len(keys) != count:
        raise ProtocolError("a cluster bulk call needs each item's key")
    if results is None:
        results = [NOT_SENT] * count
    pending: list[int] = list(range(count))
    end = min(deadline, time.monotonic() + bulk_budget(timeout, count, chunk_size))
    moved_rounds = 0
    first_round = True
    while True:
        groups = routes.groups(pending, keys)
        if groups is None:
            try:
                yield Call(nodes.refresh, (end,))
            except ClusterError:
                if first_round:
                    raise
                break  # a resend's map read the deadline cut: the refusals so far stand
            groups = routes.groups(pending, keys)
            if groups is None:
                raise ClusterError("some slots have no master: the cluster is down or being changed")
        again: list[int] = []
        moved: dict[int, Address] = {}  # applied to the map once the pass is read (see SlotMap.moved)
        redirected = False
        shares = list(groups.items())
        answers: list[list[object] | None]
        if len(shares) == 1:
            address, indices = shares[0]
            try:
                answers = [(yield from _share_flow(routes, nodes, address, indices, encode, script, reencode,
                                                   end, orphans, durable, read_only))]
            except UnsentTimeoutError as exc:  # as ``_answers``: nothing went out, the results stand
                if first_round:
                    raise
                if read_only:
                    raise _resend_cut(exc) from None
                answers = [None]
            except Exception:  # a resend's master failed: as ``_answers``, its items may have run
                if first_round or read_only:
                    raise
                answers = [[UNKNOWN] * len(indices)]
        else:  # every master at once
            calls = tuple(_share_call(nodes, address, indices, encode, script, reencode, end, orphans,
                                      durable, read_only) for address, indices in shares)
            outcomes = yield Gather(calls, None if orphans is None else partial(_abandoned, nodes, shares,
                                                                                 orphans))
            answers = _answers(routes, shares, outcomes, results, first_round, read_only)
        for (address, indices), replies in zip(shares, answers, strict=True):
            if replies is None:
                continue  # a share the deadline cut before it went out: its results stand
            if ReplyError not in set(map(type, replies)):  # no redirect, no "try again": the usual case
                routes.core.put_items(results, indices, replies)
                continue
            for position, i in enumerate(indices):
                reply = replies[position]
                redirect = redirect_of(reply, address[0])
                if redirect is not None and not redirect.ask:
                    moved[redirect.slot] = redirect.address
                    redirected = True
                    again.append(i)
                    continue
                if redirect is not None:  # the slot is being migrated: this key, once, where it goes
                    reply = yield from _ask_item_flow(routes, nodes, redirect.address, encode, i, script, end,
                                                      durable, orphans, read_only)
                    if reply is NOT_SENT:  # the node it goes to could not be reached: nothing ran
                        routes.stale = True
                        again.append(i)
                        continue
                    bounced = _bounced(routes, reply, redirect.address)
                    if bounced is not None:  # nothing ran: again, as a MOVED item
                        if not bounced.ask:
                            moved[bounced.slot] = bounced.address
                        redirected = True
                        again.append(i)
                        continue
                if retry_later(reply):  # nothing ran: again after a pause, or this refusal stands
                    routes.stale = True
                    again.append(i)
                results[i] = reply
        if moved:
            routes.moved(moved)
        pending = again
        first_round = False
        moved_rounds += redirected
        if moved_rounds >= MAX_REDIRECTS:  # the masters disagree: read the map before each round
            routes.stale = True
        if not pending or time.monotonic() + RETRY_PAUSE >= end:
            break
        yield Sleep(RETRY_PAUSE)
    if read_only and any(results[i] is NOT_SENT for i in pending):
        raise _resend_cut()
    return results


def settle_answered(results: list[object], on_replies: ReplyHandler | None) -> None:
    """A bulk call failed (every master) or was interrupted: hand what was answered to
    ``on_replies``, item by item (a bulk acquire then gives back the locks it took instead of
    leaving them held; a bulk release retries only what got no answer)."""
    if on_replies is not None:
        for i, reply in enumerate(results):
            if reply is not NOT_SENT and reply is not UNKNOWN:
                on_replies(i, [reply])


def _abandoned(nodes: Any, shares: list[tuple[Address, list[int]]], orphans: OrphanTags, index: int,
               outcome: tuple[bool, Any]) -> None:
    """A master's share answered after its caller was interrupted: what it took goes to the
    orphan handler (``Gather.abandoned``)."""
    answered, replies = outcome
    if answered and replies:
        _orphaned(nodes, orphans, shares[index][1][:len(replies)], replies)


def _orphaned(nodes: Any, orphans: OrphanTags | None, indices: list[int], replies: list[object]) -> None:
    """The items ``indices`` of a call whose caller is gone answered ``replies`` (``UNKNOWN``: may
    have run): what they took goes to the nodes' ``on_orphan``, released in the background."""
    on_orphan = getattr(nodes, "on_orphan", None)
    if orphans is not None and on_orphan is not None:
        tags = subset_orphans(orphans, indices)(0, len(indices))
        on_orphan(tags, replies if len(replies) > 1 else replies[0])


def _share_call(nodes: Any, address: Address, indices: list[int], encode: Encoder,
                script: _scripts.Script | None, reencode: Reencoder | None, deadline: float,
                orphans: Any, durable: bool, read_only: bool = False) -> CallStep:
    """The call of items ``indices`` to one master, pipelined; their replies in that order."""
    encode_share, reencode_share = subset_encoders(encode, reencode, indices)
    options: dict[str, Any] = {} if deadline == math.inf else {"deadline": deadline}
    if durable:
        options["durable"] = True
    if read_only:
        options["read_only"] = True
    if orphans is not None:
        options["orphans"] = subset_orphans(orphans, indices)
    return Call(nodes.node(address).many, (len(indices), encode_share, script, reencode_share), options)


def _share_flow(routes: ClusterRoutes, nodes: Any, address: Address, indices: list[int], encode: Encoder,
                script: _scripts.Script | None, reencode: Reencoder | None,
                deadline: float, orphans: Any = None, durable: bool = False,
                read_only: bool = False) -> Flow[list[object]]:
    try:
        replies: list[object] = yield _share_call(nodes, address, indices, encode, script, reencode, deadline,
                                                  orphans, durable, read_only)
    except BaseException as exc:
        routes.failed(address, exc)
        raise
    return replies


def _resend_cut(cause: BaseException | None = None) -> TimeoutError:
    """A read's keys sent again (redirected, or told to wait) until the deadline cut them off."""
    why = "" if cause is None else f" ({cause})"
    return TimeoutError(f"the call's deadline passed while its keys were sent again after a redirect{why}")


def _answers(routes: ClusterRoutes, shares: list[tuple[Address, list[int]]],
             outcomes: list[tuple[bool, Any]], results: list[object],
             first_round: bool = True, read_only: bool = False) -> list[list[object] | None]:
    """Each master's replies. A share the deadline cut before anything went out
    (``UnsentTimeoutError``) gets None: its items' results stand (``NOT_SENT``, or a resend's
    last replies); when that is every share of the first round, the call raises it. A master
    whose call failed while others answered gets ``UNKNOWN`` for its items (the call may have
    written before it failed: maybe held, cleaned up by the caller's lost-reply path, as a broken
    connection's are), as does every failed master of a resend; a read (``read_only``) has
    nothing to clean up and raises, a share cut before it went out too. When every master of
    the first round failed, or a call was interrupted, what the others answered goes into
    ``results`` first (see ``settle_answered``) and the first failure is raised."""
    unsent = [not ok and isinstance(value, UnsentTimeoutError) for ok, value in outcomes]
    if first_round and unsent and all(unsent):
        raise outcomes[0][1]
    cut_short = next((value for cut, (_, value) in zip(unsent, outcomes, strict=True) if cut), None)
    outcomes = [(True, None) if cut else outcome for cut, outcome in zip(unsent, outcomes, strict=True)]
    failure: BaseException | None = None
    interrupted = False
    for (address, _), (ok, value) in zip(shares, outcomes, strict=True):
        if not ok:
            routes.failed(address, value)
            failure = failure or value
            interrupted = interrupted or not isinstance(value, Exception)
    if failure is None:
        if read_only and cut_short is not None:
            raise cut_short if first_round else _resend_cut(cut_short)
        return [value for _, value in outcomes]
    if not interrupted and not read_only and (not first_round or any(ok for ok, _ in outcomes)):
        # (a resend's masters all failing too: the first round's answers, and its lost replies
        # kept in ``results``, are the caller's to settle, not dropped by an error)
        return [value if ok else [UNKNOWN] * len(indices)
                for (_, indices), (ok, value) in zip(shares, outcomes, strict=True)]
    for (_, indices), (ok, value) in zip(shares, outcomes, strict=True):
        if ok and value is not None:
            for position, i in enumerate(indices):
                results[i] = value[position]
    raise failure


def _bounced(routes: ClusterRoutes, reply: object, asked: Address) -> Redirect | None:
    """A redirect in answer to ``ASKING`` + the command (the target of a migration that is not
    importing the slot, as a reshard undone half-way leaves it, answers MOVED back to the source):
    nothing ran, the command goes again as after a MOVED. Asked on once more, the map is read
    again before that."""
    redirect = redirect_of(reply, asked[0])
    if redirect is not None and redirect.ask:
        routes.stale = True
    return redirect


def _ask_item_flow(routes: ClusterRoutes, nodes: Any, address: Address, encode: Encoder, i: int,
                   script: _scripts.Script | None, deadline: float, durable: bool,
                   orphans: OrphanTags | None = None, read_only: bool = False) -> Flow[object]:
    """Item ``i`` sent once to ``address`` after ``ASKING``; its reply, ``UNKNOWN`` when the
    connection failed after the write (a read, ``read_only``, raises that error instead) or
    ``NOT_SENT`` when nothing was written."""
    def append(buf: Any) -> None:
        encode(buf, i, i + 1)

    try:
        return (yield Call(nodes.node(address).asking_one, (append, deadline, script, durable)))
    except Unconfirmed as exc:
        if not isinstance(exc.cause, Exception):  # interrupted or cancelled: the caller goes too
            _orphaned(nodes, orphans, [i], [UNKNOWN])  # as a share's unanswered chunk is
            raise exc.cause from None
        routes.failed(address, exc.cause)
        if read_only:
            raise exc.cause from None
        return UNKNOWN
    except ClientClosedError:
        raise
    except ConnectionError:  # no connection, or the deadline passed, before anything was written
        return NOT_SENT
