"""Which node serves each Redis Cluster slot, read from ``CLUSTER SHARDS`` (Redis 7+) or
``CLUSTER SLOTS`` (older servers), and what a ``MOVED`` or ``ASK`` reply says. No I/O: the
drivers send the commands and hand the replies here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from turbolock._wire import core_py
from turbolock._wire.slots import SLOTS
from turbolock.errors import ProtocolError, ReplyError

Address = tuple[str, int]
"""(host, port) of a node, as the cluster announces it."""

GroupItems = Callable[[list[int], list[int], list[int], int], list[list[int]]]
"""A core's ``group_items``."""


class SlotMap:
    """Slot -> the master's address, for all 16384 slots (None where no master serves one)."""

    __slots__ = ("masters", "_owner", "epoch", "ids", "_master_numbers")

    def __init__(self, owner: list[Address | None], epoch: int = 0,
                 ids: frozenset[str] = frozenset(), masters: list[Address] | None = None) -> None:
        self._owner = owner
        self.masters: list[Address] = (sorted({address for address in owner if address is not None})
                                       if masters is None else masters)
        self.epoch = epoch
        """Bumped on every change, so a caller can tell whether the map it used is still current."""
        self.ids = ids
        """The node IDs of the cluster the map came from (masters and replicas)."""
        self._master_numbers: list[int] | None = None

    def node_of(self, slot: int) -> Address | None:
        return self._owner[slot]

    def group(self, indices: list[int], slots: list[int],
              group_items: GroupItems = core_py.group_items) -> dict[Address, list[int]] | None:
        """``indices`` by the master of each one's slot (``slots[j]`` is ``indices[j]``'s), each
        master's in input order, the masters in the order they first appear (a claim walks them
        so); None when a slot has no master. A bulk call's hot path: one list index and one
        append per item (4x faster than a dict lookup per item here)."""
        numbers = self._master_numbers
        if numbers is None:  # each slot's master by its place in ``masters``; none: one past them
            place: dict[Address | None, int] = {address: n for n, address in enumerate(self.masters)}
            numbers = self._master_numbers = [place.get(address, len(place)) for address in self._owner]
        lists = group_items(numbers, indices, slots, len(self.masters) + 1)
        if lists[-1]:
            return None
        present = [n for n in range(len(self.masters)) if lists[n]]
        # Where each master's first item sits: near the start unless the items come sorted by master.
        present.sort(key=lambda n: indices.index(lists[n][0]))
        return {self.masters[n]: lists[n] for n in present}

    def moved(self, changes: dict[int, Address]) -> SlotMap:
        """The map after ``MOVED`` replies (slot -> the address each named): those slots only (the
        next refresh fixes the rest). One copy for all of them, and the masters not recounted (a
        master that lost its last slot stays listed until that refresh): a reshard answers MOVED
        for hundreds of items of one call, and a copy each, recounting, cost 0.8 ms an item."""
        owner = list(self._owner)
        for slot, address in changes.items():
            owner[slot] = address
        known = set(self.masters)
        added = {address for address in changes.values() if address not in known}
        masters = sorted(known | added) if added else self.masters
        return SlotMap(owner, self.epoch + 1, self.ids, masters)

    @property
    def complete(self) -> bool:
        return all(address is not None for address in self._owner)

    def __repr__(self) -> str:
        served = sum(address is not None for address in self._owner)
        return f"SlotMap({len(self.masters)} masters, {served} of {SLOTS} slots served)"


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _pairs(flat: object) -> dict[str, object]:
    """A RESP2 map (a flat list of key, value, key, value...) as a dict with text keys."""
    if not isinstance(flat, list) or len(flat) % 2:
        raise ProtocolError(f"expected a flat map in a CLUSTER reply, got {flat!r:.200}")
    return {_text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


def _host(fields: dict[str, object], fallback: str) -> str:
    # "endpoint" is what clients should use; "?" means unknown, "" means "the address you used".
    for name in ("endpoint", "ip"):
        value = _text(fields.get(name, b"")) if fields.get(name) is not None else ""
        if value and value != "?":
            return value
    return fallback


def map_from_shards(reply: object, contacted_host: str, use_tls: bool = False) -> SlotMap:
    """The map from a ``CLUSTER SHARDS`` reply: each shard's slot ranges to its healthy master."""
    if not isinstance(reply, list):
        raise ProtocolError(f"unexpected CLUSTER SHARDS reply {reply!r:.200}")
    owner: list[Address | None] = [None] * SLOTS
    ids: set[str] = set()
    for shard in reply:
        fields = _pairs(shard)
        slots = fields.get("slots")
        nodes = fields.get("nodes")
        if not isinstance(slots, list) or not isinstance(nodes, list):
            raise ProtocolError(f"unexpected shard in CLUSTER SHARDS: {shard!r:.200}")
        master: Address | None = None
        for node in nodes:
            info = _pairs(node)
            if info.get("id") is not None:
                ids.add(_text(info["id"]))
            if _text(info.get("role", b"")) != "master" or _text(info.get("health", b"online")) != "online":
                continue
            port = info.get("tls-port") if use_tls else info.get("port")
            if port is None:
                port = info.get("port")
            if not isinstance(port, int):
                raise ProtocolError(f"no port for a master in CLUSTER SHARDS: {node!r:.200}")
            master = (_host(info, contacted_host), port)
        if master is None:
            continue  # a shard with no healthy master serves nothing right now
        for i in range(0, len(slots) - 1, 2):
            low, high = slots[i], slots[i + 1]
            if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high < SLOTS):
                raise ProtocolError(f"bad slot range in CLUSTER SHARDS: {low!r}-{high!r}")
            owner[low:high + 1] = [master] * (high - low + 1)
    return SlotMap(owner, ids=frozenset(ids))


def map_from_slots(reply: object, contacted_host: str) -> SlotMap:
    """The map from a ``CLUSTER SLOTS`` reply (servers before 7.0): [low, high, master, replicas...]."""
    if not isinstance(reply, list):
        raise ProtocolError(f"unexpected CLUSTER SLOTS reply {reply!r:.200}")
    owner: list[Address | None] = [None] * SLOTS
    ids: set[str] = set()
    for entry in reply:
        if not (isinstance(entry, list) and len(entry) >= 3 and isinstance(entry[2], list)):
            raise ProtocolError(f"unexpected entry in CLUSTER SLOTS: {entry!r:.200}")
        low, high, node = entry[0], entry[1], entry[2]
        if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high < SLOTS):
            raise ProtocolError(f"bad slot range in CLUSTER SLOTS: {low!r}-{high!r}")
        host = _text(node[0]) if node and node[0] not in (None, b"", b"?") else contacted_host
        port = node[1] if len(node) > 1 else None
        if not isinstance(port, int):
            raise ProtocolError(f"no port in CLUSTER SLOTS entry {entry!r:.200}")
        owner[low:high + 1] = [(host, port)] * (high - low + 1)
        ids.update(_text(node[2]) for node in entry[2:] if isinstance(node, list) and len(node) > 2)
    return SlotMap(owner, ids=frozenset(ids))


class Redirect(NamedTuple):
    """A ``MOVED`` (the slot now lives there: update the map) or ``ASK`` (this key only, once,
    after ``ASKING``) reply."""

    ask: bool
    slot: int
    address: Address


def redirect_of(reply: object, contacted_host: str) -> Redirect | None:
    """The redirect an error reply is, or None when it is another reply."""
    if type(reply) is not ReplyError:
        return None
    code = reply.code
    if code != "MOVED" and code != "ASK":
        return None
    parts = str(reply.args[0]).split()
    try:
        slot = int(parts[1])
        host, _, port = parts[2].rpartition(":")
        return Redirect(code == "ASK", slot, (host or contacted_host, int(port)))
    except (IndexError, ValueError):
        raise ProtocolError(f"malformed {code} reply: {reply}") from None
