"""``RedlockLock``: the object API over one Redlock name, for ``with`` blocks, decorators and
explicit calls: every Lock object's behaviour (``LockCalls``), taken on a majority of masters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from turbolock._flows.lock_flows import RedlockLockFlows
from turbolock._flows.renewal_book import AutoRenew, OnLost
from turbolock._flows.steps import Flow
from turbolock._wire.validate import Seconds
from turbolock.lock import LockCalls

if TYPE_CHECKING:
    from turbolock.redlock import RedlockClient


class RedlockLock(LockCalls, RedlockLockFlows):
    """One Redlock name with a ttl and a default way to wait, with the behaviour of every Lock
    object: ``timeout=None`` waits until the lock is taken, ``timeout=0`` or ``blocking=False``
    makes one attempt. ``QuorumError`` when too many masters failed to answer to decide."""

    kind = "RedlockLock"

    def __init__(self, client: RedlockClient, name: str | bytes, ttl: Seconds, *, blocking: bool = True,
                 timeout: Seconds | None = None, token: bytes | None = None,
                 auto_renew: bool | AutoRenew = False, on_lost: OnLost | None = None,
                 max_extensions: int | None = None, fenced: bool = False) -> None:
        self._setup(name, ttl, blocking, timeout, token, auto_renew, on_lost)
        self._init_redlock(client, max_extensions, fenced)

    def _drive(self, flow: Flow[Any]) -> Any:
        return self.client._serve(flow)  # counted as a call under way, for close()
