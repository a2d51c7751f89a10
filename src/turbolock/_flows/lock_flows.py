"""What every Lock object does, written once as flows: taking the lock (waiting, with each
attempt's deadline), releasing, extending and asking the server. The threaded and the asyncio
Lock objects only drive these (``lock.LockCalls``, ``asyncio.lock.AsyncLockCalls``); the
single-server and the Redlock ones differ only in how the lock is taken.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from turbolock import _metrics
from turbolock._flows.client_settings import check_fair, check_fenced
from turbolock._flows.fair import REPLY_LOST, Leaving
from turbolock._flows.lock_rules import LockState, Waiting, worth_retrying
from turbolock._flows.redlock_result import FencedRedlockLease, RedlockLease, RedlockResult, RedlockStatus
from turbolock._flows.steps import Call, Flow, Sleep
from turbolock._wire.fair_scripts import EXPIRE_MS, PATIENCE_MS, UNKNOWN_PLACE, WAITER_BYTES
from turbolock._wire.validate import Seconds, encode_name
from turbolock.errors import (
    ClientClosedError,
    ConnectionError,
    LockError,
    LockNotAcquiredError,
    LockNotOwnedError,
    LockUsageError,
    OutcomeUnknownError,
    QuorumError,
    RedlockNotAcquiredError,
)
from turbolock.lease import Lease

LeaseT = TypeVar("LeaseT", bound=Lease)


def give_back(client: Any, lease: Lease) -> None:
    """A lease nobody will hold (taken by an attempt that was cut short, or by a Lock object
    already held): no longer renewed, released with its token in the background (on every
    master, for a Redlock lease)."""
    if lease.renewal is not None:
        client._renewer().remove((lease,))
    client._abandoned(lease.key, lease.token, lease.expires_at)


class LockFlows(LockState[LeaseT]):
    fenced = False
    """Whether each acquire is fenced (single-server Lock objects made with ``fenced=True``)."""
    fair = False
    """Whether waiters take the lock in the order they came (``fair=True``: ``fair_scripts``)."""

    """The flows of a Lock object over ``client`` (a threaded or an asyncio client: the flows
    call its methods, which the driver runs or awaits)."""

    where = ""
    """How the server side is named in messages ("" for one server)."""

    _released = False

    _state_lock: AbstractContextManager[Any] = threading.Lock()
    """Guards the lease's check-and-set of every Lock object of the process, never held across a
    call: on the flows' slower paths, and around a threaded Lock's hot steps too (threads may
    share one object: ``lock.LockCalls``); an asyncio one changes its state between awaits only.
    Replaced in a forked child (``_after_fork_in_child``)."""

    def _init_flows(self, client: Any) -> None:
        self.client = client

    @property
    def lost(self) -> threading.Event:
        """Set when the current lease is found lost (auto-renewed locks are watched)."""
        return self._held_lease().lost

    # The flows nest as little as they can: a Lock object is often made, entered and left once
    # per use, and each generator level costs every step (measured with asyncio pairs).
    # acquire() and release() are what a Lock object does on every use, so their logic is in
    # plain methods around the one call they make (measured: a generator per use cost asyncio
    # Lock pairs about 15%); the drivers' thin wrappers make that call.
    def _acquire_start(self, blocking: bool | None, timeout: Seconds | None) -> tuple[float | None, float]:
        """The wait of an acquire() (None: until free; 0: one attempt), once the Lock is free to
        take, and when it began while telemetry listens (0.0 otherwise: ``_acquired`` reports it;
        the caller's own, as threads or tasks sharing the object each wait)."""
        wait = self._wait if blocking is None and timeout is None else self._wait_for(blocking, timeout)
        self._check_unheld()
        return wait, time.monotonic() if _metrics.sink is not None and wait != 0 else 0.0

    def _one_attempt(self) -> tuple[Any, ...] | None:
        """The arguments of ``client._attempt`` when one attempt is all an acquire needs (one
        server); None when acquiring is a flow of its own (a Redlock, a fair Lock)."""
        if self.fair:
            return None
        return (self.name, self.ttl, self._token, self.auto_renew, self.on_lost, None, self.fenced)

    def _acquire_flow(self, wait: float | None) -> Flow[LeaseT | None]:
        """The acquire that waits (or a Redlock's): attempts, pauses, the lease or None."""
        raise NotImplementedError

    def _acquired(self, lease: LeaseT | None, entering: bool, began: float = 0.0) -> bool:
        """The end of acquire(); ``entering`` for ``with``, where not taking the lock is an error;
        ``began``: ``_acquire_start``'s."""
        if began:
            sink = _metrics.sink
            if sink is not None:
                sink.waited(time.monotonic() - began, lease is not None, self.name)
        if lease is None:
            if entering:
                raise self._not_acquired_error()
            return False
        held = self._lease
        if held is not None and held._lost is None:  # another thread or task of this object got it first
            give_back(self.client, lease)
            raise LockUsageError(f"lock {self.name!r} was acquired twice at once by this {self.kind} "
                                 "object (one per thread or task); the second lease is released",
                                 names=[self.name])
        self._lease = lease
        if entering:
            blocks = self._blocks
            if self._first is None and not blocks:
                self._first = lease
            else:  # another block is open: this one is told apart by its owner
                owner = self._block_owner()
                if blocks is None:
                    self._blocks = {owner: (lease, None)}
                else:
                    blocks[owner] = (lease, blocks.get(owner))
        return True

    def _release_start(self, exiting: bool, exc_type: type[BaseException] | None) -> LeaseT | None:
        """The lease release() gives back, or None when there is nothing to release (a ``with``
        block, ``exiting`` with ``exc_type``, whose lock was released inside it)."""
        if exiting and not self._exit_check(exc_type):
            return None
        lease = self._held_lease()
        self._lease = None
        self._released = True
        return lease

    def _release_unsent(self, lease: LeaseT, exc: BaseException) -> None:
        """A release that never went out (no connection could be made): the Lock keeps its lease,
        to be released again (no longer renewed). One sent without a reply is retried in the
        background (``OutcomeUnknownError``, and a Redlock release no majority answered,
        ``QuorumError``), and an interrupted one too: the Lock lets go."""
        if (isinstance(exc, ConnectionError) and not isinstance(exc, OutcomeUnknownError | QuorumError)
                and self._lease is None):  # unless another thread or task took a new one meanwhile
            self._lease = lease
            self._released = False

    def _not_released(self, exiting: bool, exc_type: type[BaseException] | None) -> None:
        """A release the server refused (the lock had expired or was taken over)."""
        # At the end of a block that raised, its exception says more than the lost lock; the loss
        # is reported when the block succeeded, so work done without the lock is never silent.
        if exiting and exc_type is not None:
            return
        raise LockNotOwnedError(f"lock {self.name!r} was no longer held{self.where} by this "
                                f"{self.kind} when released", names=[self.name])

    def _extend_flow(self, ttl: Seconds | None, additive: bool) -> Flow[bool]:
        lease = self._held_lease()
        new_ttl = self.ttl if ttl is None else ttl
        extended = yield from self.client._extend_flow(lease, new_ttl, additive)
        if not extended:
            self._found_gone(lease)
            raise LockNotOwnedError(f"lock {self.name!r} is no longer held{self.where} by this "
                                    f"{self.kind}; it was not extended", names=[self.name])
        return True

    def _found_gone(self, lease: LeaseT) -> None:
        """An extend found ``lease`` no longer ours: it is lost (the client marked it so when the
        server said whose it is; not when its validity ran out first, or a Redlock extend came
        back too late). The object keeps it, as for ``owned()``: ``ensure_held`` raises, acquire
        may take the lock again, and a release is refused by the server (LockNotOwnedError), at
        the end of a ``with`` block too."""
        if lease._lost is None:
            self.client._lease_lost(lease, "an extend found it no longer held")

    def _owned_flow(self) -> Flow[bool]:
        lease = self._held_here()
        if lease is None:
            return False
        return (yield from self.client._check_flow(lease)) is not None  # None: the lease is lost

    def _remaining_flow(self) -> Flow[float]:
        lease = self._held_here()
        if lease is None:
            return 0.0
        left = yield from self.client._check_flow(lease)
        return 0.0 if left is None else float(left)

    def _held_here(self) -> Any:
        """The lease this Lock holds, unless none, or it is the parent's (a forked child's Lock
        holds nothing: the parent does)."""
        lease = self._lease
        return None if lease is None or getattr(lease.owner, "pid", None) != os.getpid() else lease

    def _locked_flow(self) -> Flow[bool]:
        info = yield from self.client._query_flow(self.name)
        return bool(info.held)

    def _not_acquired_error(self) -> LockError:
        return LockNotAcquiredError(self._not_acquired_message(), names=[self.name])


def _after_fork_in_child() -> None:
    # Another thread of the parent may have held it at the fork: it would never be let go here.
    LockFlows._state_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class SingleLockFlows(LockFlows[Lease]):
    """A lock on one server: attempts until the wait ends, each within the call's deadline or
    what is left of the wait if that is shorter; an attempt whose reply was lost is released in
    the background (by the client) and the wait goes on."""

    def _init_fencing(self, client: Any, fenced: object, fair: object = False) -> None:
        key, replicas = encode_name(self.name), client.options.replicas_ack
        self.fenced = fenced is not False and check_fenced(fenced, client.key_prefix, key, replicas)
        self.fair = fair is not False and check_fair(fair, client.key_prefix, key, replicas, self._token)

    @property
    def fence(self) -> int | None:
        """The fence of the lease held (a Lock made with ``fenced=True``), else None."""
        lease = self._lease
        return None if lease is None else lease.fence

    def _settings(self) -> dict[str, Any]:
        return {**super()._settings(), "fenced": self.fenced, "fair": self.fair}

    def _acquire_flow(self, wait: float | None) -> Flow[Lease | None]:
        if self.fair:
            return (yield from self._fair_acquire_flow(wait))
        client = self.client
        waiting = Waiting(wait)
        ticket = None
        woken = False  # a wake-up not yet used by an attempt that answered: leaving passes it on
        try:
            first = client._wait_first(self.name) if client._wakes_waiters else None
            if first is not None:
                key, seconds = first
                ticket = yield Call(client._wake_join, (key, waiting.join_deadline(client.options.timeout)))
                if ticket.heard:
                    waiting.woken_by_release()
                if seconds is None:  # behind this client's own waiters: woken in turn
                    pause = waiting.pause()
                    if pause:
                        woken = yield Call(client._wake_wait, (ticket, pause))
                else:  # letting waiters elsewhere go first; its own release's message must not wake it
                    yield Sleep(waiting.within(seconds))
                    client._wake_consume(ticket)  # the attempt below sees what any release did
            attempted = False
            while True:
                if attempted and waiting.over():  # no attempt sent with no time left for its answer
                    return None
                client._refuse_if_closing()  # close() ended its wait: no attempt as it closes
                attempted = True
                try:
                    deadline = waiting.attempt_deadline(client.options.timeout)
                    attempt = (self.name, self.ttl, self._token, self.auto_renew, self.on_lost, deadline,
                               self.fenced)
                    lease: Lease | None = yield Call(client._attempt, attempt)
                except ConnectionError as error:
                    if not worth_retrying(error, wait, waiting.slot_moving_for(error)):
                        raise
                    lease = None  # a lock it may have taken is released in the background
                woken = False
                if lease is not None:
                    return lease
                if ticket is None and client._wakes_waiters:
                    key = client.key_prefix + encode_name(self.name)
                    joined = waiting.join_deadline(client.options.timeout)
                    ticket = yield Call(client._wake_join, (key, joined))
                    if ticket.heard:
                        waiting.woken_by_release()
                    if waiting.over():
                        return None
                    continue  # at once: a release before the subscription was confirmed went unheard
                pause = waiting.pause()
                if pause is None:
                    return None
                if ticket is None:
                    yield Call(client._pauses.pause, (pause,))
                else:
                    woken = yield Call(client._wake_wait, (ticket, pause))
        finally:
            if ticket is not None:
                if woken:  # its wait ended, or an error or a cancel came, before an attempt answered
                    ticket.woken = True
                client._wake_leave(ticket)

    def _fair_acquire_flow(self, wait: float | None) -> Flow[Lease | None]:
        """Attempts of one waiter that keeps its place in the name's queue between them (a try,
        ``wait`` 0, takes none): the lock comes to it when everyone ahead has had it. Woken by
        releases in the order of the places; a wait that ends without the lock leaves the queue."""
        client = self.client
        waiting = Waiting(wait)
        waiter = secrets.token_bytes(WAITER_BYTES)
        queue = wait != 0.0
        ticket = None
        attempts = 0
        waiting_in = client._fair_waiting
        if queue:
            waiting_in[waiter] = (encode_name(self.name), max(self._ttl_ms, EXPIRE_MS) / 1000.0)
        try:
            while True:
                client._refuse_if_closing()  # woken by close: it leaves, in close's last cleanup
                attempts += 1
                try:
                    # A lone try gets the call's own deadline, as a plain Lock's does.
                    deadline = waiting.attempt_deadline(client.options.timeout) if queue else None
                    attempt = (self.name, self.ttl, waiter, attempts, self.auto_renew, self.on_lost,
                               self.fenced, queue, deadline)
                    got = yield Call(client._fair_attempt, attempt)
                except ConnectionError as error:
                    if not worth_retrying(error, wait, waiting.slot_moving_for(error)):
                        raise
                    got = None
                if isinstance(got, Lease):
                    if queue and not client._fair_won(waiter):
                        raise ClientClosedError()
                    return got
                if not queue:
                    return None
                if got is REPLY_LOST:  # maybe taken: leaving the queue releases the waiter's lock
                    got = None
                if ticket is None and client._wakes_waiters:
                    joined = waiting.join_deadline(client.options.timeout, PATIENCE_MS / 4000.0)
                    key = client.key_prefix + encode_name(self.name)
                    ticket = yield Call(client._wake_join, (key, joined))
                    if ticket.heard:
                        waiting.woken_by_release()
                    # Its place, or behind every known one until an attempt answers it (a rank of
                    # 0 would make it the first woken, as a waiter that is not fair is).
                    ticket.rank = UNKNOWN_PLACE if got is None else got
                    if waiting.over():
                        break
                    continue  # at once: a release before the subscription was confirmed went unheard
                if ticket is not None and got is not None:
                    ticket.rank = got
                pause = waiting.pause()
                if pause is None:
                    break
                if ticket is None:
                    yield Call(client._pauses.pause, (pause,))
                else:
                    yield Call(client._wake_wait, (ticket, pause))
        except GeneratorExit:
            raise
        except BaseException:  # an error, an interrupt, a cancelled task: it leaves, then raises
            if queue:
                yield from self._leave_queue(waiter)
            raise
        finally:
            waiting_in.pop(waiter, None)
            client._fair_left.discard(waiter)
            if ticket is not None:
                client._wake_leave(ticket)
        yield from self._leave_queue(waiter)
        return None

    def _leave_queue(self, waiter: bytes) -> Flow[None]:
        """Leave the queue, in the background (the client's cleanup, until the server answers):
        the place goes, and a lock one of its unanswered attempts took is released."""
        forget_at = time.monotonic() + max(self._ttl_ms, EXPIRE_MS) / 1000.0
        self.client._remember_cleanup(encode_name(self.name), Leaving(waiter), forget_at)
        return
        yield


class RedlockLockFlows(LockFlows[RedlockLease]):
    """A lock on a majority of masters: the client's acquire waits (random retry delays, the
    client's ``retry_count``); the object keeps the last result and the lease's status."""

    where = " on a majority of masters"
    max_extensions: int | None

    def _init_redlock(self, client: Any, max_extensions: int | None, fenced: object = False) -> None:
        ms, _, node_timeout = client._ttl(self.ttl)
        client._renew_policy(self.auto_renew, self.on_lost, ms, node_timeout)
        client._extension_limit(max_extensions)
        key = encode_name(self.name)
        self.fenced = fenced is not False and check_fenced(fenced, client.key_prefix, key, 0)
        self._init_flows(client)
        self.max_extensions = max_extensions
        self._result: RedlockResult | None = None

    @property
    def fences(self) -> tuple[int | None, ...] | None:
        """The per-master fences of the lease held (a Lock made with ``fenced=True``), else None."""
        lease = self._lease
        return lease.fences if isinstance(lease, FencedRedlockLease) else None

    @property
    def result(self) -> RedlockResult | None:
        """The last acquire's result (status, per-instance counts, attempts), None before one."""
        return self._result

    @property
    def status(self) -> RedlockStatus | None:
        """Acquired or Expired while a lease is held, Unlocked once released, else the last
        acquire's status (None before any)."""
        lease = self._lease
        if lease is not None:
            return lease.status
        if self._released:
            return RedlockStatus.UNLOCKED
        return None if self._result is None else self._result.status

    def _one_attempt(self) -> tuple[Any, ...] | None:
        return None

    def _acquire_flow(self, wait: float | None) -> Flow[RedlockLease | None]:
        result: RedlockResult = yield from self.client._acquire_flow(
            self.name, self.ttl, wait != 0.0, wait or None, self._token, self.auto_renew, self.on_lost,
            self.max_extensions, self.fenced)
        with self._state_lock:
            self._result = result
            self._released = False
        if result.status is RedlockStatus.NO_QUORUM:
            raise QuorumError(f"could not reach a quorum for {result.describe()}", [self.name], result)
        return result.lease

    def _not_acquired_error(self) -> LockError:
        result = self._result
        wait = self._wait
        waited = f" within {wait:g}s" if wait else ""
        detail = result.describe() if result is not None else f"lock {self.name!r}"
        return RedlockNotAcquiredError(f"not acquired{waited}: {detail}", result, names=[self.name])

    def _settings(self) -> dict[str, Any]:
        return {**super()._settings(), "max_extensions": self.max_extensions, "fenced": self.fenced}

    def __repr__(self) -> str:
        status = self.status
        return (f"{self.kind}(name={self.name!r}, ttl={self.ttl!r}, "
                f"status={None if status is None else status.value!r})")

