"""What every Redlock client (threads or asyncio) holds and checks without I/O: its settings,
the timeouts and validity a ttl gives, leases and their ownership, and how a lost or dropped
lease is handled. The flows of ``redlock_single``, ``redlock_bulk`` and ``redlock_claim`` run
on it; the clients add only a driver and the masters' connections.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from turbolock._flows.client_settings import CodecAndChunks, renew_policy
from turbolock._flows.closing import Closable
from turbolock._flows.ownership import Owner, check_lease
from turbolock._flows.redlock_result import (
    FencedRedlockLease,
    InstanceSummary,
    RedlockLease,
    drift_ms,
    refusal,
)
from turbolock._flows.renewal_book import AutoRenew, OnLost
from turbolock._flows.renewer_slot import RenewerSlot
from turbolock._wire import scripts as _scripts
from turbolock._wire.validate import (
    MAX_TIMEOUT_SECONDS,
    Seconds,
    check_token,
    encode_name,
    positive_seconds,
    timeout_seconds,
    ttl_ms,
)
from turbolock.errors import InvalidArgumentError, InvalidArgumentTypeError, ReplyError

SCRIPT_REFUSED = "can't run this command"
"""What Redis 7.0 answers (an ERR) when a script calls a command its ACL user may not run."""

DEFAULT_NODE_TIMEOUT = 0.05
"""Longest wait for one master's reply, unless a tenth of the ttl is shorter."""
MAX_CHUNK_TIMEOUT = 1.0
"""Longest wait for one master's replies to a bulk chunk (or a renewal round)."""
DEFAULT_RETRY_DELAY = 0.2
DEFAULT_DRIFT_FACTOR = 0.01

CLEANUP_GRACE = 1.0
"""Seconds past a lock's ttl during which a maybe-held key is still worth releasing."""

RETRIED_ON_MASTERS = "it is retried on those when they answer"
"""A Redlock release no majority confirmed: the fate of one whose client is open."""
TRIED_AS_IT_CLOSES = ("the client was closed meanwhile: at most one more try as it closes, else it expires "
                      "by its ttl")
"""The same, once a threaded client is closing: its close() tries once more what the calls it served
left owed; an asyncio client's does not (those calls end after its masters' last try)."""


def count_int(value: object, argument: str, allow_none: bool) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentTypeError(argument, "must be an int" + (" or None" if allow_none else ""))
    if value < 0:
        raise InvalidArgumentError(argument, "must not be negative")
    return value


def remember(master: Any, keys: Sequence[bytes], tokens: Sequence[bytes], forget_at: float,
             recheck: bool = False) -> None:
    """Release these locks on this master with their tokens as soon as it answers again (its
    client's maybe-held releases, run in the background or in front of the next write to it);
    ``recheck``: tokens the client made, released again when found free (a lost acquire may
    still arrive: ``CleanupBook``)."""
    for key, token in zip(keys, tokens, strict=True):
        master._remember_cleanup(key, token, forget_at, recheck)


def owe_release(master: Any, m: int, lease: Any, reply: object, forget_at: float) -> None:
    """After a release of ``lease`` answered ``reply`` by master ``m``: sent again when that
    master answers if it got no answer; and where the acquire's own reply was lost
    (``lease._unsure``), unless it released the lock there, with rechecks (the lost ``SET`` may
    land after a release that found the key free)."""
    if m in lease._unsure:
        if not (type(reply) is int and _scripts.released(reply)):
            remember(master, [lease.key], [lease.token], forget_at, True)
    elif type(reply) is not int:
        remember(master, [lease.key], [lease.token], forget_at)


class RedlockRules(Closable, CodecAndChunks, RenewerSlot):
    """Settings and checks of a Redlock client; ``masters`` are its per-master clients."""

    masters: tuple[Any, ...]
    master_names: tuple[str, ...]
    """Each master's name for fenced leases' ``MasterFences`` (``redlock_result.master_names``)."""
    quorum: int
    key_prefix: bytes
    core: ModuleType
    _chunk_size: int
    _opened: list[Any]
    _fan_one: Callable[..., Any]
    """A fan-out of one command to the masters, for a flow's Call (see ``steps``)."""
    _pauses: Any
    """The front's ``Pauses``: a blocking acquire's retry delays, which close() ends."""
    _fan_many: Callable[..., Any]
    """A fan-out of many items in chunks to the masters, for a flow's Call (see ``steps``)."""

    def _configure(self, node_timeout: Seconds | None, retry_count: int | None, retry_delay: Seconds,
                   drift_factor: float) -> None:
        self.node_timeout = None if node_timeout is None else positive_seconds(node_timeout, "node_timeout")
        self.retry_count = count_int(retry_count, "retry_count", allow_none=True)
        delay = timeout_seconds(retry_delay, "retry_delay")
        if delay is None:
            raise InvalidArgumentError("retry_delay", "must be a finite number of seconds")
        if delay > MAX_TIMEOUT_SECONDS:  # a sleep that long overflows the platform's time_t
            raise InvalidArgumentError("retry_delay",
                                       f"must be at most {MAX_TIMEOUT_SECONDS} seconds (a year)")
        self.retry_delay = delay
        if isinstance(drift_factor, bool) or not isinstance(drift_factor, int | float):
            raise InvalidArgumentTypeError("drift_factor", "must be a float")
        if not 0.0 <= drift_factor < 0.5:
            raise InvalidArgumentError("drift_factor", "must be at least 0 and below 0.5")
        self.drift_factor = float(drift_factor)
        self._owner = Owner()
        self._ttls: dict[object, tuple[int, float, float]] = {}

    def node_timeout_for(self, ms: int) -> float:
        """The per-node timeout used for locks of ``ms`` milliseconds."""
        if self.node_timeout is not None:
            return self.node_timeout
        if ms <= 0:  # an adopted lease, whose ttl is not known yet
            return DEFAULT_NODE_TIMEOUT
        return min(DEFAULT_NODE_TIMEOUT, ms / 10_000.0)

    def chunk_timeout_for(self, ms: int) -> float:
        """The per-node timeout of one bulk chunk or renewal round, for locks of ``ms`` milliseconds.

        Longer than a single command's: a loaded server takes a while over a thousand commands,
        and a master timed out mid-batch misses the rest of it. Still a tenth of the ttl at most
        (unless ``node_timeout`` is longer), so a stuck master cannot eat the validity.
        """
        return max(self.node_timeout_for(ms), min(MAX_CHUNK_TIMEOUT, ms / 10_000.0))

    def _ttl(self, ttl: object, argument: str = "ttl") -> tuple[int, float, float]:
        """(ttl in ms, its drift allowance in ms, its per-node timeout), refusing a ttl that would
        leave no validity even when every master answers at its last moment."""
        if type(ttl) is int or type(ttl) is float:  # most callers use a handful of ttls
            known = self._ttls.get(ttl)
            if known is not None:
                return known
        ms = ttl_ms(ttl, argument)
        drift = drift_ms(ms, self.drift_factor)
        node_timeout = self.node_timeout_for(ms)
        if ms - drift - node_timeout * 1000.0 <= 0:
            hint = " or a shorter node_timeout" if self.node_timeout is not None else ""
            raise InvalidArgumentError(
                argument, f"{ms} ms leaves no validity once the clock drift allowance ({drift:g} ms) and "
                          f"the per-node timeout ({node_timeout * 1000:g} ms) are taken off; use a longer "
                          f"ttl{hint}")
        if type(ttl) is int or type(ttl) is float:
            if len(self._ttls) >= 64:
                self._ttls.clear()
            self._ttls[ttl] = (ms, drift, node_timeout)
        return ms, drift, node_timeout

    def _renew_policy(self, auto_renew: bool | AutoRenew, on_lost: OnLost | None, ms: int,
                      node_timeout: float) -> AutoRenew | None:
        if auto_renew is False and on_lost is None:  # most acquires: nothing to check
            return None
        return renew_policy(auto_renew, on_lost, ms)

    @staticmethod
    def _extension_limit(max_extensions: object) -> int | None:
        return count_int(max_extensions, "max_extensions", allow_none=True)

    def _check_lease(self, lease: object, argument: str = "lease") -> RedlockLease:
        check_lease(lease, self._owner, RedlockLease, argument, FencedRedlockLease)
        assert isinstance(lease, RedlockLease)
        return lease

    def lease(self, name: str | bytes, token: bytes) -> RedlockLease:
        """A lease for a Redlock taken elsewhere with ``token``, to extend or release it here.
        Nothing is sent: it has no validity until ``extend`` succeeds."""
        encode_name(name)  # refuses a bad name before anything else
        return RedlockLease(name, check_token(token), 0, time.monotonic(), self._owner, 0.0,
                            InstanceSummary(0, 0, 0), None)

    def _lease_lost(self, lease: RedlockLease, reason: str) -> None:
        renewer = self._renewer_instance
        if lease.renewal is not None and renewer is not None:
            renewer._lost(lease, reason)
        else:
            lease.mark_lost(reason)

    def _abandoned(self, key: bytes, token: bytes, forget_at: float, recheck: bool = False) -> None:
        """A lease the program dropped (or keys set on a minority, or an interrupted attempt's):
        released on every master in the background (``recheck``: see ``remember``)."""
        for master in self.masters:
            master._remember_cleanup(key, token, forget_at, recheck)

    def _master_errors(self, replies: Sequence[object], errors: Sequence[str | None]) -> tuple[str, ...]:
        out = []
        for client, reply, error in zip(self.masters, replies, errors, strict=True):
            if error is not None:
                out.append(error)
            elif type(reply) is ReplyError:
                text = f"{client.options.address} answered {reply.code}"
                # Redis 7.0 words an ACL refusal inside a script as an ERR
                forbidden = reply.code == "NOPERM" or SCRIPT_REFUSED in str(reply)
                out.append(refusal(text + " (not permitted)", "NOPERM") if forbidden else text)
        return tuple(out)

    def _addresses(self) -> str:
        return ", ".join(client.options.address for client in self.masters)
