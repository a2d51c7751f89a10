"""A throwaway PKI for the TLS tests (one server, a cluster): a CA, a server certificate for
localhost and 127.0.0.1, one for a wrong name, and a client certificate, made with ``openssl``."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    wrong_name_cert: Path
    wrong_name_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def _leaf(directory: Path, name: str, ca_cert: Path, ca_key: Path,
          extensions: list[str]) -> tuple[Path, Path]:
    key, csr, cert, ext = (directory / f"{name}.{suffix}" for suffix in ("key", "csr", "crt", "ext"))
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
    ext.write_text("\n".join([
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "authorityKeyIdentifier=keyid,issuer",
        "subjectKeyIdentifier=hash",
        *extensions,
    ]) + "\n")
    _openssl("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial",
             "-out", cert, "-days", "2", "-sha256", "-extfile", ext)
    return cert, key


def make_pki(directory: Path) -> Pki:
    """A CA and certificates signed by it, made with ``openssl`` in ``directory``."""
    ca_cert, ca_key = directory / "ca.crt", directory / "ca.key"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", ca_key, "-out", ca_cert, "-days", "2", "-sha256", "-subj", "/CN=turbolock test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    server_cert, server_key = _leaf(directory, "localhost", ca_cert, ca_key, [
        "subjectAltName=DNS:localhost,IP:127.0.0.1", "extendedKeyUsage=serverAuth"])
    wrong_cert, wrong_key = _leaf(directory, "wrong.example", ca_cert, ca_key, [
        "subjectAltName=DNS:wrong.example", "extendedKeyUsage=serverAuth"])
    client_cert, client_key = _leaf(directory, "turbolock-client", ca_cert, ca_key, [
        "extendedKeyUsage=clientAuth"])
    return Pki(ca_cert, server_cert, server_key, wrong_cert, wrong_key, client_cert, client_key)
