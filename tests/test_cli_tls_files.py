"""``turbolock locks ...`` and ``turbolock doctor`` given a ``rediss://`` URL whose TLS file cannot
be loaded (``ssl_ca_certs`` / ``ssl_certfile`` naming a missing file) exit 2 naming the option, as
``LockClient`` raises ``InvalidArgumentError`` naming it for the same URL. They exited 1 with
"ConnectionError: Error 2 connecting to localhost:PORT. No such file or directory." (doctor:
"problem connect: cannot reach localhost:PORT: ..."), as if the server were missing (found in
review): redis-py opened the URL before turbolock's own check. The server here is up."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from _cli import run_cli
from _pki import Pki
from turbolock import InvalidArgumentError, LockClient
from turbolock.redis_server import RedisServer, free_port


@pytest.fixture(scope="module")
def tls_server(pki: Pki) -> Iterator[RedisServer]:
    port = free_port()
    config = ["port 0", f"tls-port {port}", f"tls-cert-file {pki.server_cert}",
              f"tls-key-file {pki.server_key}", f"tls-ca-cert-file {pki.ca}", "tls-auth-clients no"]
    with RedisServer(port=port, extra_config=config) as server:
        yield server


def _urls(server: RedisServer, pki: Pki) -> dict[str, tuple[str, str]]:
    base = f"rediss://localhost:{server.port}/0"
    return {"ca-missing": (f"{base}?ssl_ca_certs=/nonexistent/ca.pem", "ssl_ca_certs"),
            "cert-missing": (f"{base}?ssl_ca_certs={pki.ca}&ssl_certfile=/nonexistent/client.crt"
                             f"&ssl_keyfile={pki.client_key}", "ssl_certfile")}


@pytest.mark.parametrize("which", ["ca-missing", "cert-missing"])
def test_the_client_names_the_option(tls_server: RedisServer, pki: Pki, which: str) -> None:
    """Control: the library itself calls this bad input, naming the option."""
    url, option = _urls(tls_server, pki)[which]
    with pytest.raises(InvalidArgumentError, match=option):
        with LockClient.from_url(url) as client:
            client.try_acquire("x", 1)


@pytest.mark.parametrize("which", ["ca-missing", "cert-missing"])
@pytest.mark.parametrize("command", [["locks", "list"], ["doctor"]], ids=["locks-list", "doctor"])
def test_a_tls_file_that_cannot_be_loaded_is_bad_input(tls_server: RedisServer, pki: Pki, command: list[str],
                                                      which: str) -> None:
    url, option = _urls(tls_server, pki)[which]
    done = run_cli(*command, url, timeout=60)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, (done.returncode, done.stdout[-600:], done.stderr[-600:])
    assert option in done.stderr, done.stderr[-600:]
