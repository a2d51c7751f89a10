"""What a Redlock call hands back: a status, what the masters said, and a lease when it worked.

The statuses and the per-instance counts follow RedLock.net: a lock is Acquired with a quorum
and validity left; Expired when a quorum answered but the time it took used up the validity;
Conflicted when enough masters answered but others hold the lock on too many of them; NoQuorum
when too many masters failed to answer for anything to be decided; Unlocked once released.
NotTried is a claim's own (``acquire_many(..., limit=k)``): a name it never got to.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from turbolock.errors import AuthenticationError, LockError, ResponseError
from turbolock.lease import Lease


class RedlockStatus(enum.Enum):
    ACQUIRED = "acquired"
    CONFLICTED = "conflicted"
    NO_QUORUM = "no quorum"
    EXPIRED = "expired"
    UNLOCKED = "unlocked"
    NOT_TRIED = "not tried"

    def __str__(self) -> str:
        return self.value


class InstanceSummary(NamedTuple):
    """How many masters took the lock, how many found it held by someone else, how many failed
    (no connection, no reply in time, or an error reply)."""

    acquired: int
    conflicted: int
    errored: int

    def __str__(self) -> str:
        return f"acquired {self.acquired}, conflicted {self.conflicted}, errored {self.errored}"


def decide(summary: InstanceSummary, quorum: int, valid: bool) -> RedlockStatus:
    """The status of one attempt (RedLock.net's rules)."""
    if summary.acquired >= quorum:
        return RedlockStatus.ACQUIRED if valid else RedlockStatus.EXPIRED
    if summary.acquired + summary.conflicted >= quorum:
        return RedlockStatus.CONFLICTED
    return RedlockStatus.NO_QUORUM


def drift_ms(ttl_ms: int, drift_factor: float) -> float:
    """The clock drift allowed for over ``ttl_ms``: a share of the ttl plus 2 ms (the Redlock rule)."""
    return ttl_ms * drift_factor + 2.0


class RedlockLease(Lease):
    """Proof of holding a Redlock: the same token on a majority of the masters.

    ``valid_for()`` is the Redlock validity: the ttl, minus the time from before the first write
    of the last acquire or extend, minus the clock drift allowance. ``status`` is Acquired while
    that lasts, Expired after, Unlocked once released. The token is never shown.
    """

    __slots__ = ("drift_ms", "extensions", "max_extensions", "instances", "_released", "_unsure",
                 "_set_again")

    def __init__(self, name: str | bytes, token: bytes, ttl_ms: int, acquired_at: float,
                 owner: object, drift: float, instances: InstanceSummary,
                 max_extensions: int | None) -> None:
        # Lease's fields, set here rather than through super().__init__: bulk calls make 100k of
        # these, and the extra call was a sixth of a bulk acquire's client time.
        self._name = name
        self.token = token
        self.ttl_ms = ttl_ms
        self.acquired_at = acquired_at
        self.owner = owner
        self.renewal = None
        self._lost = None
        self._lost_event = None
        self._expires = None
        self._flight = None
        self._ghost = None
        self.drift_ms = drift
        self.instances = instances
        self.extensions = 0
        self.max_extensions = max_extensions
        self._released = False
        self._unsure: tuple[int, ...] = ()
        """Masters whose reply to the acquire was lost (its token the client's own): a release
        that finds the lock free there releases it again later, as the SET may still land."""
        self._set_again: tuple[int, ...] = ()
        """Masters where an extend or renewal not decided extended set the key again: no
        majority stands behind it there (``redlock_scripts.tally``)."""

    def expiry_after(self, sent_at: float, ttl_ms: int) -> float:
        """Where a command sent at ``sent_at`` that sets ``ttl_ms`` leaves the validity."""
        return sent_at + (ttl_ms - self.drift_ms) / 1000.0

    @property
    def status(self) -> RedlockStatus:
        if self._released:
            return RedlockStatus.UNLOCKED
        if self._lost is not None or self.expires_at <= time.monotonic():
            return RedlockStatus.EXPIRED
        return RedlockStatus.ACQUIRED

    def __repr__(self) -> str:
        state = f", lost={self._lost!r}" if self._lost is not None else ""
        renew = ", auto_renew=True" if self.renewal is not None else ""
        return (f"RedlockLease(name={self.name!r}, ttl={self.ttl:g}, valid_for={self.valid_for():.3f}, "
                f"status={self.status.value!r}, instances=({self.instances}){renew}{state})")


class MasterFences(tuple[int | None, ...]):
    """A fenced Redlock lease's ``fences``: one per master, in the client's order of masters,
    and in ``masters`` the name of each (its address as the client was given it: host, port and
    db). ``FencedStore`` keeps each master's highest fence under that master's name, so clients
    that list the same masters in different orders still compare a master's fences with that
    master's own. It compares equal to the plain tuple of its numbers."""

    masters: tuple[str, ...]

    def __new__(cls, fences: Iterator[int | None] | Sequence[int | None],
                masters: tuple[str, ...]) -> MasterFences:
        made = super().__new__(cls, fences)
        made.masters = masters
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild it with its names (a tuple's own way passes the numbers alone)
        return (MasterFences, (tuple(self), self.masters))


def master_names(masters: Sequence[Any]) -> tuple[str, ...]:
    """Each Redlock master's name for ``MasterFences``: its address, host lowercased, and db."""
    names = []
    for master in masters:
        options = master.options
        where = options.unix_socket_path or f"{options.host.lower()}:{options.port}"
        names.append(f"{where}/{options.db}")
    return tuple(names)


class FencedRedlockLease(RedlockLease):
    """A Redlock lease with its fences: one per master, from that master's own counter for the
    name, None where the acquire was not granted. Masters count independently, so no single
    number orders grants: two majorities always share a master, whose fence grew between the
    two grants, but the largest fence of each grant need not grow. A resource that keeps, per
    master, the highest fence it has seen and refuses any fence vector with an entry below it
    (``turbolock.fencing.FencedStore`` does, given ``lease.fences``) refuses every stale holder
    once its successor has been there. That holds while the counters do: a master restarted
    without persistence forgets its counter (run the masters with ``appendonly yes``)."""

    __slots__ = ("fences",)

    def __init__(self, name: str | bytes, token: bytes, ttl_ms: int, acquired_at: float,
                 owner: object, drift: float, instances: InstanceSummary, max_extensions: int | None,
                 fences: tuple[int | None, ...]) -> None:
        super().__init__(name, token, ttl_ms, acquired_at, owner, drift, instances, max_extensions)
        self.fences = fences
        """One per master (``MasterFences``, with the masters' names), None where not granted."""


class Refusal(str):
    """Why a master failed, when retrying cannot mend it: it refused this client's credentials,
    or a command its ACL user may not run (``code``: ``AUTH`` or ``NOPERM``)."""

    code = "AUTH"


def refusal(text: str, code: str) -> Refusal:
    made = Refusal(text)
    made.code = code
    return made


def describe_failure(exc: BaseException) -> str:
    """A master's failure for ``RedlockResult.errors`` (a ``Refusal`` when it refused the
    client's credentials)."""
    text = str(exc) or type(exc).__name__
    return refusal(text, "AUTH") if isinstance(exc, AuthenticationError) else text


class RedlockResult:
    """One Redlock acquire: its ``status``, the masters' answers on the last attempt
    (``instances``), how many ``attempts`` were made, and the ``lease`` when Acquired.

    True in a boolean context exactly when the lock was acquired. ``errors`` says why masters
    failed on the last attempt (address and reason; never a token or a password).
    """

    __slots__ = ("name", "status", "instances", "attempts", "lease", "quorum", "errors")

    def __init__(self, name: str | bytes, status: RedlockStatus, instances: InstanceSummary, attempts: int,
                 lease: RedlockLease | None, quorum: int, errors: tuple[str, ...]) -> None:
        self.name = name
        self.status = status
        self.instances = instances
        self.attempts = attempts
        self.lease = lease
        self.quorum = quorum
        self.errors = errors

    @property
    def acquired(self) -> bool:
        return self.lease is not None

    def __bool__(self) -> bool:
        return self.lease is not None

    def describe(self) -> str:
        """A sentence for messages: the status, the counts, the quorum, the first error."""
        masters = sum(self.instances)
        tries = f" after {self.attempts} attempts" if self.attempts != 1 else ""
        text = (f"lock {self.name!r}: {self.status.value} ({self.instances} of {masters} masters; "
                f"quorum {self.quorum}){tries}")
        if self.errors:
            more = len(self.errors) - 1
            text += f"; {self.errors[0]}" + (f" (and {more} more)" if more else "")
        return text

    def refused(self) -> LockError | None:
        """The error to raise when masters that refuse this client (``Refusal``) leave too few
        for a quorum: no retry can take the lock, so a wait must not go on (it would, for ever)."""
        refusals = [error for error in self.errors if type(error) is Refusal]
        masters = sum(self.instances)
        if masters - len(refusals) >= self.quorum:
            return None
        message = (f"lock {self.name!r}: {len(refusals)} of {masters} masters refused this client, too many "
                   f"for a quorum of {self.quorum}: {'; '.join(refusals)}")
        if any(error.code == "AUTH" for error in refusals):
            return AuthenticationError(message, [self.name])
        return ResponseError(message, "NOPERM", names=[self.name])

    def __repr__(self) -> str:
        return (f"RedlockResult(name={self.name!r}, status={self.status.value!r}, "
                f"instances=({self.instances}), attempts={self.attempts})")


class RedlockManyResult(Sequence[RedlockLease | None]):
    """One entry per requested name, in input order: its ``RedlockLease``, or None.

    ``statuses[i]`` says what happened to name ``i`` and ``summary(i)`` what the masters
    answered for it. With ``all_or_nothing=True`` and any name not acquired, every entry is None
    (what was taken was released again) and the statuses say why each name failed or would
    have succeeded. With ``limit=k`` (a claim), the names it never got to are NOT_TRIED and
    listed in ``not_tried``: every name is then in exactly one of ``acquired``,
    ``not_acquired``, ``no_quorum`` and ``not_tried``.
    """

    __slots__ = ("names", "leases", "statuses", "quorum", "_acquired", "_conflicted", "_errored")

    def __init__(self, names: list[str | bytes], leases: list[RedlockLease | None],
                 statuses: list[RedlockStatus], quorum: int, acquired: list[int], conflicted: list[int],
                 errored: list[int]) -> None:
        self.names = names
        self.leases = leases
        self.statuses = statuses
        self.quorum = quorum
        self._acquired = acquired
        self._conflicted = conflicted
        self._errored = errored

    def summary(self, index: int) -> InstanceSummary:
        """What the masters answered for the name at ``index``."""
        return InstanceSummary(self._acquired[index], self._conflicted[index], self._errored[index])

    @property
    def acquired(self) -> list[RedlockLease]:
        return [lease for lease in self.leases if lease is not None]

    @property
    def not_acquired(self) -> list[str | bytes]:
        """Names held by others on too many masters, or whose attempt ran out of validity (not
        those an all-or-nothing call took and gave back, as on one server)."""
        return [name for name, lease, status in zip(self.names, self.leases, self.statuses, strict=True)
                if lease is None and status is not RedlockStatus.NO_QUORUM
                and status is not RedlockStatus.NOT_TRIED and status is not RedlockStatus.ACQUIRED]

    @property
    def no_quorum(self) -> list[str | bytes]:
        """Names for which too many masters failed to answer to decide."""
        return [name for name, status in zip(self.names, self.statuses, strict=True)
                if status is RedlockStatus.NO_QUORUM]

    @property
    def not_tried(self) -> list[str | bytes]:
        """Names a claim (``limit=k``) never got to, in input order: it had its k first, or a
        chunk found too many masters failing to answer."""
        return [name for name, status in zip(self.names, self.statuses, strict=True)
                if status is RedlockStatus.NOT_TRIED]

    @property
    def lost(self) -> list[str | bytes]:
        """Names of the leases found lost since (auto-renewed leases are watched)."""
        return [lease.name for lease in self.leases if lease is not None and lease.is_lost]

    @property
    def all_acquired(self) -> bool:
        return all(lease is not None for lease in self.leases)

    def counts(self) -> dict[RedlockStatus, int]:
        """How many names ended in each status."""
        out: dict[RedlockStatus, int] = {}
        for status in self.statuses:
            out[status] = out.get(status, 0) + 1
        return out

    def __len__(self) -> int:
        return len(self.leases)

    def __getitem__(self, index: Any) -> Any:
        return self.leases[index]

    def __iter__(self) -> Iterator[RedlockLease | None]:
        return iter(self.leases)

    def __repr__(self) -> str:
        counts = ", ".join(f"{status.value}={n}" for status, n in self.counts().items())
        return f"RedlockManyResult(requested={len(self.leases)}, {counts})"
