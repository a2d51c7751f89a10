"""Who may use a lease: the client that made it, in the process that made it.

A forked child inherits its parent's clients and leases, but the parent still holds those
locks: the child gets a new owner for every client, so the parent's leases are refused there
instead of being renewed or released twice.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

from turbolock.errors import InvalidArgumentError, InvalidArgumentTypeError


class Owner:
    """Marks the leases of one client in one process."""

    __slots__ = ("pid",)

    def __init__(self) -> None:
        self.pid = os.getpid()


class ForkAware(Protocol):
    def _forget_parent_locks(self) -> None: ...


_watched: weakref.WeakSet[ForkAware] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_watched):
        client._forget_parent_locks()


os.register_at_fork(after_in_child=_after_fork_in_child)


def forget_parent_locks_after_fork(client: ForkAware) -> None:
    """Have ``client._forget_parent_locks()`` run in every forked child."""
    _watched.add(client)


def check_lease(lease: object, owner: Owner, lease_type: type, argument: str,
                also: type | None = None) -> None:
    """Refuse a missing lease, one of another type (``lease_type``, or ``also``), or one made by
    another client or process."""
    if lease is None:
        raise InvalidArgumentTypeError(argument, "is missing (None); acquire returned no lease")
    kind = type(lease)
    if kind is not lease_type and kind is not also:
        raise InvalidArgumentTypeError(
            argument, f"must be a {lease_type.__name__}, not {kind.__name__}")
    made_by = lease.owner  # type: ignore[attr-defined]  # every lease type has it
    if made_by is not owner:
        name = getattr(lease, "name", "?")
        if isinstance(made_by, Owner) and made_by.pid != owner.pid:
            raise InvalidArgumentError(
                argument, f"for lock {name!r} was acquired in another process (before a fork); "
                          "only that process may use it")
        raise InvalidArgumentError(argument, f"for lock {name!r} was made by another client")
