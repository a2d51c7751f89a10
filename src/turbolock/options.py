"""How to reach the server: address, credentials, TLS and timeouts, from keywords, a URL or redis-py.

The password is kept out of every repr and message.
"""

from __future__ import annotations

import ssl as _ssl
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from ._validate import positive_seconds
from .errors import InvalidArgumentError, InvalidArgumentTypeError

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_TIMEOUT = 5.0

_CERT_REQS = {"none": _ssl.CERT_NONE, "optional": _ssl.CERT_OPTIONAL, "required": _ssl.CERT_REQUIRED}


@dataclass(frozen=True)
class ConnectionOptions:
    """Where the server is and how to talk to it.

    ``timeout`` is the deadline of one client call (acquire, release, a whole bulk chunk);
    ``connect_timeout`` bounds opening a connection, AUTH and SELECT included.
    TLS verifies the certificate and the host name unless ``insecure=True``.
    """

    host: str = "127.0.0.1"
    port: int = 6379
    unix_socket_path: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl: bool = False
    ssl_ca_certs: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_cert_reqs: str = "required"
    ssl_check_hostname: bool = True
    insecure: bool = False
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or isinstance(self.port, bool) or not 0 < self.port < 65536:
            raise InvalidArgumentError("port", "must be an int from 1 to 65535")
        if not isinstance(self.db, int) or isinstance(self.db, bool) or self.db < 0:
            raise InvalidArgumentError("db", "must be a non-negative int")
        object.__setattr__(self, "connect_timeout", positive_seconds(self.connect_timeout, "connect_timeout"))
        object.__setattr__(self, "timeout", positive_seconds(self.timeout, "timeout"))
        if self.ssl_cert_reqs not in _CERT_REQS:
            raise InvalidArgumentError("ssl_cert_reqs", "must be 'none', 'optional' or 'required'")
        if self.ssl and not self.insecure:
            if self.ssl_cert_reqs != "required":
                raise InvalidArgumentError(
                    "ssl_cert_reqs", "TLS without certificate verification needs insecure=True")
            if not self.ssl_check_hostname:
                raise InvalidArgumentError(
                    "ssl_check_hostname", "TLS without host name verification needs insecure=True")
        if self.password is not None and not isinstance(self.password, str):
            raise InvalidArgumentTypeError("password", "must be str")
        if self.username is not None and not isinstance(self.username, str):
            raise InvalidArgumentTypeError("username", "must be str")

    @property
    def address(self) -> str:
        """Where the server is, for messages (no credentials)."""
        if self.unix_socket_path is not None:
            return f"unix:{self.unix_socket_path}"
        return f"{self.host}:{self.port}"

    def ssl_context(self) -> _ssl.SSLContext:
        context = _ssl.create_default_context(cafile=self.ssl_ca_certs)
        if self.ssl_certfile:
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        if self.insecure:
            context.check_hostname = self.ssl_check_hostname and self.ssl_cert_reqs == "required"
            context.verify_mode = _CERT_REQS[self.ssl_cert_reqs]
        return context

    def with_changes(self, **changes: Any) -> ConnectionOptions:
        return replace(self, **changes)


_URL_KEYS = {
    "socket_timeout": "timeout",
    "socket_connect_timeout": "connect_timeout",
    "ssl_ca_certs": "ssl_ca_certs",
    "ssl_certfile": "ssl_certfile",
    "ssl_keyfile": "ssl_keyfile",
    "ssl_cert_reqs": "ssl_cert_reqs",
    "ssl_check_hostname": "ssl_check_hostname",
}


def options_from_url(url: str, **overrides: Any) -> ConnectionOptions:
    """``redis://``, ``rediss://`` or ``unix://`` URL, as redis-py reads it; keywords win."""
    if not isinstance(url, str):
        raise InvalidArgumentTypeError("url", f"must be str, not {type(url).__name__}")
    scheme = urlsplit(url).scheme
    if scheme not in ("redis", "rediss", "unix"):
        raise InvalidArgumentError("url", f"unknown scheme {scheme!r}; use redis://, rediss:// or unix://")
    from redis.connection import parse_url

    try:
        parsed: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        raise InvalidArgumentError("url", _without_secrets(str(exc), url)) from None
    kwargs: dict[str, Any] = {}
    for key in ("host", "port", "db", "username", "password"):
        if parsed.get(key) is not None:
            kwargs[key] = parsed[key]
    if "path" in parsed:
        kwargs["unix_socket_path"] = parsed["path"]
    if scheme == "rediss":
        kwargs["ssl"] = True
    for source, target in _URL_KEYS.items():
        if parsed.get(source) is not None:
            value = parsed[source]
            if target == "ssl_cert_reqs" and isinstance(value, str):
                value = value.lower()
            kwargs[target] = value
    kwargs.update(overrides)
    return ConnectionOptions(**kwargs)


def _without_secrets(message: str, url: str) -> str:
    password = urlsplit(url).password
    return message.replace(password, "***") if password else message


def options_from_redis(client: Any, **overrides: Any) -> ConnectionOptions:
    """Take over host, port or socket path, db, credentials, TLS and timeouts of a ``redis.Redis``."""
    pool = getattr(client, "connection_pool", None)
    if pool is None or not hasattr(pool, "connection_kwargs"):
        raise InvalidArgumentTypeError("client", f"must be a redis.Redis, not {type(client).__name__}")
    source = dict(pool.connection_kwargs)
    if source.get("credential_provider") is not None:
        username, password = source["credential_provider"].get_credentials()
        source["username"], source["password"] = (username, password) if password else (None, username)
    kwargs: dict[str, Any] = {"db": source.get("db") or 0}
    if source.get("path"):
        kwargs["unix_socket_path"] = source["path"]
    else:
        kwargs["host"] = source.get("host", "127.0.0.1")
        kwargs["port"] = int(source.get("port", 6379))
    for key in ("username", "password"):
        if source.get(key) is not None:
            kwargs[key] = source[key]
    if source.get("socket_timeout"):
        kwargs["timeout"] = source["socket_timeout"]
    if source.get("socket_connect_timeout"):
        kwargs["connect_timeout"] = source["socket_connect_timeout"]
    if "ssl_cert_reqs" in source or pool.connection_class.__name__.endswith("SSLConnection"):
        kwargs["ssl"] = True
        for key in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname"):
            if source.get(key) is not None:
                kwargs[key] = source[key]
        reqs = source.get("ssl_cert_reqs", "required")
        kwargs["ssl_cert_reqs"] = {v: k for k, v in _CERT_REQS.items()}.get(reqs, reqs) if reqs is not None \
            else "none"
    kwargs.update(overrides)
    return ConnectionOptions(**kwargs)
