"""What every Lock object does, written once as flows: taking the lock (waiting, with each
attempt's deadline), releasing, extending and asking the server. The threaded and the asyncio
Lock objects only drive these (``lock.LockCalls``, ``asyncio.lock.AsyncLockCalls``); the
single-server and the Redlock ones differ only in how the lock is taken.
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

from turbolock._flows.lock_rules import LockState, Waiting, worth_retrying
from turbolock._flows.redlock_result import RedlockLease, RedlockResult, RedlockStatus
from turbolock._flows.steps import Call, Flow, Sleep
from turbolock._wire.validate import Seconds
from turbolock.errors import (
    ConnectionError,
    LockError,
    LockNotAcquiredError,
    LockNotOwnedError,
    QuorumError,
    RedlockNotAcquiredError,
)
from turbolock.lease import Lease

LeaseT = TypeVar("LeaseT", bound=Lease)


class LockFlows(LockState[LeaseT]):
    """The flows of a Lock object over ``client`` (a threaded or an asyncio client: the flows
    call its methods, which the driver runs or awaits)."""

    client: Any
    where = ""
    """How the server side is named in messages ("" for one server)."""

    def _init_flows(self, client: Any) -> None:
        self.client = client
        self._state_lock = threading.Lock()

    def _take_flow(self, wait: float | None) -> Flow[LeaseT | None]:
        raise NotImplementedError

    @property
    def lost(self) -> threading.Event:
        """Set when the current lease is found lost (auto-renewed locks are watched)."""
        return self._held_lease().lost

    def _acquire_flow(self, blocking: bool | None, timeout: Seconds | None) -> Flow[bool]:
        wait = self._wait_for(blocking, timeout)
        with self._state_lock:
            self._check_unheld()
        lease = yield from self._take_flow(wait)
        if lease is None:
            return False
        with self._state_lock:
            self._lease = lease
        return True

    def _enter_flow(self) -> Flow[None]:
        if not (yield from self._acquire_flow(None, None)):
            raise self._not_acquired_error()
        self._entered = self._lease

    def _release_flow(self) -> Flow[None]:
        with self._state_lock:
            lease = self._held_lease()
            self._lease = None
            self._released_here()
        if not (yield Call(self.client.release, (lease,))):
            raise LockNotOwnedError(f"lock {self.name!r} was no longer held{self.where} by this "
                                    f"{self.kind} when released", names=[self.name])

    def _exit_flow(self, exc_type: type[BaseException] | None) -> Flow[None]:
        if not self._exit_check(exc_type):
            return
        try:
            yield from self._release_flow()
        except LockNotOwnedError:
            # The block's own exception says more than the lost lock; report the loss only when
            # the block itself succeeded, so work done without the lock is never silent.
            if exc_type is None:
                raise

    def _extend_flow(self, ttl: Seconds | None, additive: bool) -> Flow[bool]:
        lease = self._held_lease()
        new_ttl = self.ttl if ttl is None else ttl
        extended = yield Call(self.client.extend, (lease, new_ttl), {"additive": additive})
        if not extended:
            with self._state_lock:
                self._drop(lease)
            raise LockNotOwnedError(f"lock {self.name!r} is no longer held{self.where} by this "
                                    f"{self.kind}; it was not extended", names=[self.name])
        return True

    def _owned_flow(self) -> Flow[bool]:
        lease = self._lease
        if lease is None:
            return False
        return (yield Call(self.client.check, (lease,))) is not None

    def _remaining_flow(self) -> Flow[float]:
        lease = self._lease
        if lease is None:
            return 0.0
        left = yield Call(self.client.check, (lease,))
        return 0.0 if left is None else float(left)

    def _locked_flow(self) -> Flow[bool]:
        info = yield Call(self.client.query, (self.name,))
        return bool(info.held)

    def _released_here(self) -> None:
        """A hook for the state a release changes (called under the state lock)."""

    def _not_acquired_error(self) -> LockError:
        return LockNotAcquiredError(self._not_acquired_message(), names=[self.name])


class SingleLockFlows(LockFlows[Lease]):
    """A lock on one server: attempts until the wait ends, each within the call's deadline or
    what is left of the wait if that is shorter; an attempt whose reply was lost is released in
    the background (by the client) and the wait goes on."""

    def _take_flow(self, wait: float | None) -> Flow[Lease | None]:
        client = self.client
        if wait == 0.0:  # one attempt, with the call's own deadline
            lease: Lease | None = yield Call(client._attempt, (self.name, self.ttl, self._token,
                                                               self.auto_renew, self.on_lost, None))
            return lease
        waiting = Waiting(wait)
        while True:
            try:
                deadline = waiting.attempt_deadline(client.options.timeout)
                attempt = (self.name, self.ttl, self._token, self.auto_renew, self.on_lost, deadline)
                lease = yield Call(client._attempt, attempt)
            except ConnectionError as error:
                if not worth_retrying(error, wait):
                    raise
                lease = None  # a lock it may have taken is released in the background
            if lease is not None:
                return lease
            pause = waiting.pause()
            if pause is None:
                return None
            yield Sleep(pause)


class RedlockLockFlows(LockFlows[RedlockLease]):
    """A lock on a majority of masters: the client's acquire waits (random retry delays, the
    client's ``retry_count``); the object keeps the last result and the lease's status."""

    where = " on a majority of masters"
    max_extensions: int | None

    def _init_redlock(self, client: Any, max_extensions: int | None) -> None:
        ms, _, node_timeout = client._ttl(self.ttl)
        client._renew_policy(self.auto_renew, self.on_lost, ms, node_timeout)
        client._extension_limit(max_extensions)
        self._init_flows(client)
        self.max_extensions = max_extensions
        self._result: RedlockResult | None = None
        self._released = False

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

    def _take_flow(self, wait: float | None) -> Flow[RedlockLease | None]:
        result: RedlockResult = yield Call(self.client.acquire, (self.name, self.ttl), {
            "blocking": wait != 0.0, "timeout": wait or None, "token": self._token,
            "auto_renew": self.auto_renew, "on_lost": self.on_lost, "max_extensions": self.max_extensions})
        with self._state_lock:
            self._result = result
            self._released = False
        if result.status is RedlockStatus.NO_QUORUM:
            raise QuorumError(f"could not reach a quorum for {result.describe()}", [self.name], result)
        return result.lease

    def _released_here(self) -> None:
        self._released = True

    def _not_acquired_error(self) -> LockError:
        result = self._result
        wait = self._wait
        waited = f" within {wait:g}s" if wait else ""
        detail = result.describe() if result is not None else f"lock {self.name!r}"
        return RedlockNotAcquiredError(f"not acquired{waited}: {detail}", result, names=[self.name])

    def _settings(self) -> dict[str, Any]:
        return {**super()._settings(), "max_extensions": self.max_extensions}

    def __repr__(self) -> str:
        status = self.status
        return (f"{self.kind}(name={self.name!r}, ttl={self.ttl!r}, "
                f"status={None if status is None else status.value!r})")
