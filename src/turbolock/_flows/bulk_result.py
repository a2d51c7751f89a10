"""The result of a bulk acquire, one entry per requested name; the same type for every client."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from turbolock.lease import Lease


class AcquireManyResult(Sequence[Lease | None]):
    """One entry per requested name, in input order: its ``Lease``, or None when not acquired.

    ``not_acquired`` lists the names someone else held. ``not_durable`` (with ``replicas_ack``)
    those the master granted but too few replicas acknowledged in time: their entries are None,
    and they were released again. With ``all_or_nothing=True`` and any name held elsewhere or
    not durable, every entry is None (what was taken was released again) and ``all_acquired``
    is False.
    """

    __slots__ = ("names", "leases", "not_acquired", "not_durable")

    def __init__(self, names: list[str | bytes], leases: list[Lease | None],
                 not_acquired: list[str | bytes], not_durable: list[str | bytes] | None = None) -> None:
        self.names = names
        self.leases = leases
        self.not_acquired = not_acquired
        self.not_durable = [] if not_durable is None else not_durable

    @property
    def acquired(self) -> list[Lease]:
        return [lease for lease in self.leases if lease is not None]

    @property
    def lost(self) -> list[str | bytes]:
        """Names of the leases found lost since (auto-renewed leases are watched)."""
        return [lease.name for lease in self.leases if lease is not None and lease.is_lost]

    @property
    def all_acquired(self) -> bool:
        return not self.not_acquired and all(lease is not None for lease in self.leases)

    def __len__(self) -> int:
        return len(self.leases)

    def __getitem__(self, index: Any) -> Any:
        return self.leases[index]

    def __iter__(self) -> Iterator[Lease | None]:
        return iter(self.leases)

    def __repr__(self) -> str:
        return f"AcquireManyResult(requested={len(self.leases)}, acquired={len(self.acquired)})"
