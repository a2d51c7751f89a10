"""TLS against a real redis-server listening with ``tls-port`` only.

The test makes its own CA and certificates with ``openssl`` in a temporary directory. The
server takes ``port 0`` (no plain TCP) and ``tls-port`` on the port ``RedisServer`` probes
for readiness (a plain TCP connect, which a TLS port accepts too).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from _pki import Pki
from _waking import PROMPT, handover_delays, stop_polling
from turbolock import ConnectionError, InvalidArgumentError, LockClient, OutcomeUnknownError
from turbolock.redis_server import RedisServer, free_port

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")


def _tls_server(pki: Pki, cert: Path, key: Path, *, auth_clients: bool) -> RedisServer:
    port = free_port()
    return RedisServer(port=port, extra_config=[
        "port 0",
        f"tls-port {port}",
        f"tls-cert-file {cert}",
        f"tls-key-file {key}",
        f"tls-ca-cert-file {pki.ca}",
        f"tls-auth-clients {'yes' if auth_clients else 'no'}",
    ])


@pytest.fixture(scope="module")
def tls_server(pki: Pki) -> Iterator[RedisServer]:
    with _tls_server(pki, pki.server_cert, pki.server_key, auth_clients=False) as server:
        yield server


@pytest.fixture(scope="module")
def wrong_name_server(pki: Pki) -> Iterator[RedisServer]:
    """Presents a certificate from the trusted CA, but for wrong.example only."""
    with _tls_server(pki, pki.wrong_name_cert, pki.wrong_name_key, auth_clients=False) as server:
        yield server


@pytest.fixture(scope="module")
def mutual_tls_server(pki: Pki) -> Iterator[RedisServer]:
    with _tls_server(pki, pki.server_cert, pki.server_key, auth_clients=True) as server:
        yield server


def _raw_tls(server: RedisServer, pki: Pki) -> redis.Redis:
    # An observer only: it trusts the CA but does not check the name (one server has the wrong one).
    return redis.Redis(host="127.0.0.1", port=server.port, ssl=True, ssl_ca_certs=str(pki.ca),
                       ssl_check_hostname=False, ssl_certfile=str(pki.client_cert),
                       ssl_keyfile=str(pki.client_key))


def _lifecycle(client: LockClient, raw: redis.Redis) -> None:
    lease = client.try_acquire("tls-lock", 30)
    assert lease is not None
    assert raw.get(client.key_prefix + b"tls-lock") == lease.token, "the lock is not on the server"
    assert client.try_acquire("tls-lock", 30) is None
    assert client.query("tls-lock").held
    assert client.extend(lease, 40)
    assert client.release(lease) is True
    assert not raw.exists(client.key_prefix + b"tls-lock")
    result = client.acquire_many(["a", "b", "c"], 10)
    assert result.all_acquired
    assert client.release_many(result.acquired) == [True, True, True]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_rediss_url_with_the_ca_works(tls_server: RedisServer, pki: Pki, core_name: str, key_prefix: str,
                                      host: str) -> None:
    url = f"rediss://{host}:{tls_server.port}/0"
    ca = str(pki.ca)
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, ssl_ca_certs=ca) as client, \
            _raw_tls(tls_server, pki) as raw:
        assert client.options.ssl
        _lifecycle(client, raw)


@pytest.mark.timing
def test_a_waiter_is_woken_over_tls(tls_server: RedisServer, pki: Pki, core_name: str, key_prefix: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The subscriber's thread reads and writes its TLS socket alone (a TLS connection is not
    # for two threads at once).
    stop_polling(monkeypatch)
    url = f"rediss://localhost:{tls_server.port}/0"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, ssl_ca_certs=str(pki.ca)) as client:
        delays = handover_delays(client, 2)
    assert max(delays) < PROMPT, delays


def test_ca_in_the_url_query_works(tls_server: RedisServer, pki: Pki, core_name: str,
                                   key_prefix: str) -> None:
    url = f"rediss://127.0.0.1:{tls_server.port}/0?ssl_ca_certs={pki.ca}"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client, \
            _raw_tls(tls_server, pki) as raw:
        assert client.options.ssl_ca_certs == str(pki.ca)
        _lifecycle(client, raw)


def test_tls_keyword_constructor_works(tls_server: RedisServer, pki: Pki, core_name: str,
                                       key_prefix: str) -> None:
    with LockClient("localhost", tls_server.port, ssl=True, ssl_ca_certs=str(pki.ca), core=core_name,
                    key_prefix=key_prefix) as client, _raw_tls(tls_server, pki) as raw:
        _lifecycle(client, raw)


def test_from_redis_takes_over_tls(tls_server: RedisServer, pki: Pki, core_name: str,
                                   key_prefix: str) -> None:
    source = redis.Redis(host="127.0.0.1", port=tls_server.port, ssl=True, ssl_ca_certs=str(pki.ca))
    with source, LockClient.from_redis(source, core=core_name, key_prefix=key_prefix) as client:
        assert client.options.ssl
        assert client.options.ssl_ca_certs == str(pki.ca)
        assert client.options.ssl_cert_reqs == "required"
        _lifecycle(client, source)


def test_default_trust_refuses_the_private_ca(tls_server: RedisServer, core_name: str,
                                              key_prefix: str) -> None:
    url = f"rediss://127.0.0.1:{tls_server.port}/0"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, connect_timeout=5) as client:
        with pytest.raises(ConnectionError) as raised:
            client.query("x")
        assert "CERTIFICATE_VERIFY_FAILED" in str(raised.value) or "certificate" in str(raised.value).lower()
        # The handshake failed before the SET went out: the outcome is known, nothing to clean up.
        with pytest.raises(ConnectionError) as raised:
            client.try_acquire("x", 10)
        assert not isinstance(raised.value, OutcomeUnknownError)
        assert client.pending_cleanup == 0


def test_host_name_mismatch_is_refused(wrong_name_server: RedisServer, pki: Pki, core_name: str,
                                       key_prefix: str) -> None:
    url = f"rediss://127.0.0.1:{wrong_name_server.port}/0"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, ssl_ca_certs=str(pki.ca)) as client:
        with pytest.raises(ConnectionError) as raised:
            client.query("x")
        assert not isinstance(raised.value, OutcomeUnknownError)
        with pytest.raises(ConnectionError) as raised:
            client.try_acquire("x", 10)
        assert not isinstance(raised.value, OutcomeUnknownError)


def test_host_name_mismatch_accepted_only_when_insecure(wrong_name_server: RedisServer, pki: Pki,
                                                         core_name: str, key_prefix: str) -> None:
    url = f"rediss://127.0.0.1:{wrong_name_server.port}/0?ssl_check_hostname=false"
    with pytest.raises(InvalidArgumentError):
        LockClient.from_url(url, core=core_name, key_prefix=key_prefix, ssl_ca_certs=str(pki.ca))
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, ssl_ca_certs=str(pki.ca),
                             insecure=True) as client:
        assert client.options.ssl_check_hostname is False
        lease = client.try_acquire("x", 10)
        assert lease is not None
        assert client.release(lease)


def test_unverified_host_name_error_names_ssl_check_hostname() -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient.from_url(f"rediss://127.0.0.1:{free_port()}/0?ssl_check_hostname=false")
    assert raised.value.argument == "ssl_check_hostname"
    assert "insecure" in str(raised.value)


@pytest.mark.parametrize("reqs", ["none", "optional", "NONE"])
def test_unverified_tls_needs_insecure(reqs: str) -> None:
    # Refused before any connection is tried: nothing listens on this port.
    url = f"rediss://127.0.0.1:{free_port()}/0?ssl_cert_reqs={reqs}"
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient.from_url(url)
    assert raised.value.argument == "ssl_cert_reqs"
    assert "insecure" in str(raised.value)
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient("127.0.0.1", 6380, ssl=True, ssl_cert_reqs=reqs.lower())
    assert raised.value.argument == "ssl_cert_reqs"


def test_from_redis_without_verification_needs_insecure() -> None:
    source = redis.Redis(host="127.0.0.1", port=free_port(), ssl=True, ssl_cert_reqs="none")
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient.from_redis(source)
    assert raised.value.argument == "ssl_cert_reqs"
    LockClient.from_redis(source, insecure=True).close()


def test_cert_reqs_none_with_insecure_works(tls_server: RedisServer, wrong_name_server: RedisServer, pki: Pki,
                                            core_name: str, key_prefix: str) -> None:
    # No CA at all and, on the second server, the wrong name: insecure accepts both.
    for server in (tls_server, wrong_name_server):
        url = f"rediss://127.0.0.1:{server.port}/0?ssl_cert_reqs=none"
        with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, insecure=True) as client, \
                _raw_tls(server, pki) as raw:
            assert client.options.ssl_cert_reqs == "none"
            _lifecycle(client, raw)


def test_client_certificate_required_by_the_server(mutual_tls_server: RedisServer, pki: Pki, core_name: str,
                                                   key_prefix: str) -> None:
    url = f"rediss://127.0.0.1:{mutual_tls_server.port}/0"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, ssl_ca_certs=str(pki.ca),
                             timeout=5) as client:
        with pytest.raises(ConnectionError):
            client.query("x")
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, ssl_ca_certs=str(pki.ca),
                             ssl_certfile=str(pki.client_cert), ssl_keyfile=str(pki.client_key)) as client, \
            _raw_tls(mutual_tls_server, pki) as raw:
        _lifecycle(client, raw)


def test_an_encrypted_client_key_is_opened_with_ssl_password(mutual_tls_server: RedisServer, pki: Pki,
                                                             core_name: str, key_prefix: str,
                                                             tmp_path: Path) -> None:
    # Without its passphrase the key is refused at once (never asked for on a terminal); with it
    # (or taken over from a redis.Redis by from_redis) the client works, and shows it nowhere.
    passphrase = "key-Pa55phrase"
    encrypted = tmp_path / "client-encrypted.key"
    encrypt = ["openssl", "pkey", "-in", str(pki.client_key), "-aes256", "-out", str(encrypted)]
    subprocess.run([*encrypt, "-passout", f"pass:{passphrase}"], check=True, capture_output=True)
    url = f"rediss://127.0.0.1:{mutual_tls_server.port}/0"
    files = {"ssl_ca_certs": str(pki.ca), "ssl_certfile": str(pki.client_cert), "ssl_keyfile": str(encrypted)}
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, timeout=5, **files) as client:
        with pytest.raises(InvalidArgumentError) as refused:
            client.query("x")
        assert refused.value.argument == "ssl_password" and "encrypted" in str(refused.value)
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, ssl_password=passphrase,
                             **files) as client, _raw_tls(mutual_tls_server, pki) as raw:
        _lifecycle(client, raw)
        assert passphrase not in repr(client) and passphrase not in repr(client.options)
    source = redis.Redis(host="127.0.0.1", port=mutual_tls_server.port, ssl=True, ssl_password=passphrase,
                         **files)
    with source, LockClient.from_redis(source, core=core_name, key_prefix=key_prefix) as client:
        _lifecycle(client, source)


def test_plain_client_on_the_tls_port_fails(tls_server: RedisServer, core_name: str, key_prefix: str) -> None:
    url = f"redis://127.0.0.1:{tls_server.port}/0"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, timeout=2) as client:
        started = time.monotonic()
        with pytest.raises(ConnectionError):
            client.query("x")
        assert time.monotonic() - started < 30


def test_tls_client_on_a_plain_port_fails(redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    url = f"rediss://127.0.0.1:{redis_server.port}/0"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, connect_timeout=0.5,
                             timeout=2) as client:
        started = time.monotonic()
        with pytest.raises(ConnectionError) as raised:
            client.try_acquire("x", 10)
        assert not isinstance(raised.value, OutcomeUnknownError)
        assert time.monotonic() - started < 30
