"""One lock on one server, for the blocking and the asyncio clients alike: reading a reply into a
result (or the ``Unconfirmed`` failure of a write without reply into the error), and the flows
of release, extend, check and query over the client's executor (see ``steps``).
"""

from __future__ import annotations

import time
from typing import Any

from turbolock import _metrics
from turbolock._flows.renewal_book import check_renewed_ttl, extends_unconfirmed
from turbolock._flows.steps import Call, Flow
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import NOT_DURABLE, Unconfirmed
from turbolock._wire.replies import reply_error
from turbolock._wire.validate import MAX_TTL_MS, check_flag, check_token, encode_name, ttl_ms
from turbolock.errors import InvalidArgumentError, OutcomeUnknownError
from turbolock.lease import (
    FencedLease,
    Lease,
    LockInfo,
    commands_ran,
    commands_refused,
    commands_sent,
    info_from_pttl,
    lease_released,
)


def acquire_result(client: Any, reply: object, name: str | bytes, key: bytes, token: bytes, ttl_ms: int,
                   sent_at: float, policy: Any, on_lost: Any) -> Lease | None:
    """A lease when ``SET NX PX`` answered OK, a ``FencedLease`` when ``FENCED_ACQUIRE`` answered
    a fence (renewed under ``policy`` if there is one), None when someone else holds the lock; an
    error reply raises."""
    if reply is None:
        sink = _metrics.sink
        if sink is not None:
            sink.acquired(0, 1, time.monotonic() - sent_at, "acquire", name)
        return None
    lease: Lease | None = None
    if reply == b"OK":
        lease = Lease(name, token, ttl_ms, sent_at, client._owner)
    elif type(reply) is int:
        lease = FencedLease(name, token, ttl_ms, sent_at, client._owner, reply)
    if lease is not None:
        if policy is not None:
            client._renewer().add((lease,), policy, on_lost)
        sink = _metrics.sink
        if sink is not None:
            sink.acquired(1, 0, time.monotonic() - sent_at, "acquire", name)
        return lease
    if reply is NOT_DURABLE:
        raise client._not_durable([(name, key, token, time.monotonic() + ttl_ms / 1000.0)])
    raise client._refused(reply, name)


def release_result(client: Any, reply: object, lease: Lease, sent_at: float) -> bool:
    if type(reply) is int:
        if reply > 1:  # 1 + the subscribers told (see ``scripts.RELEASE``)
            client._released(lease.key, reply)
        ours = reply >= 1
        lease_released(lease, ours)
        sink = _metrics.sink
        if sink is not None:
            sink.released(int(ours), int(not ours), _metrics.since(sent_at), "release")
        return ours
    raise reply_error(reply, lease.name)


def release_unconfirmed(client: Any, lease: Lease, exc: Unconfirmed) -> BaseException:
    """The release may not have run: it is retried in the background; the error to raise."""
    client._remember_cleanup(lease.key, lease.token, time.monotonic() + lease.ttl_ms / 1000.0)
    if not isinstance(exc.cause, Exception):
        return exc.cause
    fate = client._owed_release_fate("it will be retried")
    return OutcomeUnknownError(f"release of lock {lease.name!r} may not have happened ({exc}); {fate}",
                               [lease.name])


def extend_ms(lease: Lease, ttl: object, additive: bool) -> int:
    """The ttl an extend sends: ``ttl``, or with ``additive`` that much more than the lease has
    left by the local clock (which the server's remaining ttl can only exceed)."""
    ms = ttl_ms(ttl)
    if check_flag(additive, "additive"):
        ms += int(lease.valid_for() * 1000.0)
        if ms > MAX_TTL_MS:
            raise InvalidArgumentError("ttl", f"added to what is left, passes {MAX_TTL_MS // 1000} seconds")
    check_renewed_ttl((lease,), ms)
    return ms


def extend_result(client: Any, reply: object, lease: Lease, ttl_ms: int, sent_at: float) -> bool:
    """True when extended: the lease then believes the earliest ttl that may have been set last
    (see ``lease``). False when the lock is no longer ours: the lease is lost."""
    if type(reply) is not int:
        commands_refused((lease,), sent_at)
        raise reply_error(reply, lease.name)
    sink = _metrics.sink
    if sink is not None:
        sink.extended(1 if reply == 1 else 0, 0 if reply == 1 else 1, time.monotonic() - sent_at, "extend")
    if reply != 1:
        commands_refused((lease,), sent_at)
        client._lease_lost(lease, "an extend found its key gone or held by another token")
        return False
    commands_ran((lease,), sent_at, ttl_ms)
    if lease.renewal is not None:
        client._renewer().rescheduled(lease)
    return True


def adopted_lease(name: str | bytes, token: bytes, owner: object) -> Lease:
    """A lease for a lock taken elsewhere with ``token``: no time believed left until extended."""
    encode_name(name)  # refuses a bad name before anything else
    return Lease(name, check_token(token), 0, time.monotonic(), owner)


def extend_unconfirmed(lease: Lease, exc: Unconfirmed) -> BaseException:
    if not isinstance(exc.cause, Exception):
        return exc.cause
    return OutcomeUnknownError(f"extend of lock {lease.name!r} may not have happened ({exc})", [lease.name])


def check_result(reply: object, lease: Lease) -> float | None:
    """Seconds left when the lease still holds the lock, else None."""
    if type(reply) is not int:
        raise reply_error(reply, lease.name)
    if reply == _scripts.NOT_OURS or reply == -2:
        return None
    return info_from_pttl(reply).remaining


def query_result(reply: object, name: str | bytes) -> LockInfo:
    if type(reply) is int:
        return info_from_pttl(reply)
    raise reply_error(reply, name)


# -- the flows: one lock's release, extend, check and query, for threads and asyncio alike --------

# A release is in every use of a lock: its logic is in the plain functions around the one call
# the clients make (a flow's generator and driver cost a tenth of an asyncio acquire+release).
def releasing(client: Any, lease: Lease) -> None:
    """Before a release is sent: the lease is checked and no longer renewed."""
    client._check_lease(lease)
    if lease.renewal is not None:
        client._renewer().remove((lease,))


def release_failed(client: Any, lease: Lease, exc: BaseException) -> BaseException:
    """The error to raise for a release whose call failed; one that may not have run (written
    without reply, or interrupted or cancelled before it went out) is owed in the background."""
    if isinstance(exc, Unconfirmed):
        return release_unconfirmed(client, lease, exc)
    if not isinstance(exc, Exception):
        client._remember_cleanup(lease.key, lease.token, time.monotonic() + lease.ttl_ms / 1000.0)
    return exc


def extend_flow(client: Any, lease: Lease, ttl: object, additive: bool) -> Flow[bool]:
    client._check_lease(lease)
    ms = extend_ms(lease, ttl, additive)
    sent_at = time.monotonic()
    commands_sent((lease,), sent_at, lease.expiry_after(sent_at, ms))
    try:
        reply = yield Call(client._exec.script_one, (_scripts.EXTEND, lease.key, lease.token, ms))
    except Unconfirmed as exc:
        extends_unconfirmed(client, (lease,), sent_at)
        raise extend_unconfirmed(lease, exc) from None
    except BaseException:
        commands_refused((lease,), sent_at)
        raise
    return extend_result(client, reply, lease, ms, sent_at)


def check_flow(client: Any, lease: Lease) -> Flow[float | None]:
    client._check_lease(lease)
    try:
        reply = yield Call(client._exec.script_one, (_scripts.CHECK, lease.key, lease.token, None))
    except Unconfirmed as exc:
        raise exc.cause from None
    left = check_result(reply, lease)
    if left is None:  # not ours: lost (ensure_held raises from here), unless released
        client._lease_lost(lease, "a check found its key gone or held by another token")
    return left


def query_flow(client: Any, name: str | bytes) -> Flow[LockInfo]:
    key = encode_name(name)
    reply = yield Call(client._exec.pttl_one, (key,))
    return query_result(reply, name)
