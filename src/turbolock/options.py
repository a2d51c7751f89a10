"""How to reach the server: address, credentials, TLS and timeouts, from keywords, a URL or redis-py.

Keywords may use redis-py's names as well as turbolock's (``socket_timeout`` for ``timeout``...).
The password is kept out of every repr and message.
"""

from __future__ import annotations

import difflib
import os
import re
import ssl as _ssl
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urlsplit

from turbolock._wire.validate import positive_seconds
from turbolock.errors import InvalidArgumentError, InvalidArgumentTypeError

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_TIMEOUT = 5.0
DEFAULT_REPLICAS_TIMEOUT = 0.1

_CERT_REQS = {"none": _ssl.CERT_NONE, "optional": _ssl.CERT_OPTIONAL, "required": _ssl.CERT_REQUIRED}
_CERT_REQS_NAMES = {mode: name for name, mode in _CERT_REQS.items()}


MAX_C_INT = 2**31 - 1
"""The largest ``db`` and ``replicas_ack`` a server takes."""


@dataclass(frozen=True)
class ConnectionOptions:
    """Where the server is and how to talk to it.

    ``timeout`` is the deadline of one client call (acquire, release, a whole bulk chunk);
    ``connect_timeout`` bounds opening a connection, AUTH, SELECT and PING included.
    TLS verifies the certificate and the host name unless ``insecure=True``; ``ssl_password``
    opens an encrypted ``ssl_keyfile`` (without it such a key is refused, never asked for).

    ``replicas_ack=N`` makes every acquire wait (``WAIT N``, at most ``replicas_timeout``) until N
    replicas have it: a lock fewer replicas acknowledged could vanish in a failover, so it is
    released again and reported (``NotDurableError``, or ``result.not_durable`` in bulk).

    ``wake_waiters`` (on by default): a blocking acquire that finds its lock held is woken by the
    release, through one subscriber connection per client (``SSUBSCRIBE`` to the lock's key,
    which the release script publishes on); False leaves waiters polling only. Every field is
    checked here (``InvalidArgumentError``/``InvalidArgumentTypeError`` naming it); to build
    options from keywords that may use redis-py's names, use ``options_from_keywords``.
    """

    host: str = "127.0.0.1"
    port: int = 6379
    unix_socket_path: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    credential_provider: Any = field(default=None, repr=False, compare=False)
    """redis-py's ``CredentialProvider`` (of ``from_redis``): asked by every new connection, so
    credentials that rotate (cloud IAM tokens) are read when they are used, not once."""
    ssl: bool = False
    ssl_ca_certs: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_cert_reqs: str = "required"
    ssl_check_hostname: bool = True
    insecure: bool = False
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    timeout: float = DEFAULT_TIMEOUT
    replicas_ack: int = 0
    replicas_timeout: float = DEFAULT_REPLICAS_TIMEOUT
    wake_waiters: bool = True

    def __post_init__(self) -> None:
        check_host(self.host, "host")
        _check_int(self.port, "port")
        if not 0 < self.port < 65536:
            raise InvalidArgumentError("port", "must be an int from 1 to 65535")
        socket_path = _optional_path(self.unix_socket_path, "unix_socket_path")
        if socket_path == "":
            raise InvalidArgumentError("unix_socket_path", "must not be empty")
        object.__setattr__(self, "unix_socket_path", socket_path)
        _check_int(self.db, "db")
        if not 0 <= self.db <= MAX_C_INT:  # the server's db index is a C int
            raise InvalidArgumentError("db", f"must be an int from 0 to {MAX_C_INT}")
        for secret in ("password", "ssl_password"):
            value = getattr(self, secret)
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentTypeError(secret, f"must be str, not {type(value).__name__}")
        provider = self.credential_provider
        if provider is not None and not callable(getattr(provider, "get_credentials", None)):
            raise InvalidArgumentTypeError("credential_provider", f"must have get_credentials(), not be a "
                                                                  f"{type(provider).__name__}")
        if self.username is not None:
            _check_str(self.username, "username")
            if self.username and self.password is None:  # one-argument AUTH: the default user's
                raise InvalidArgumentError("username", "comes without a password (a nopass user takes any: "
                                                       "password='')")
        for flag in ("ssl", "ssl_check_hostname", "insecure", "wake_waiters"):
            value = getattr(self, flag)
            if not isinstance(value, bool):
                raise InvalidArgumentTypeError(flag, f"must be a bool, not {type(value).__name__}")
        for path in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile"):
            object.__setattr__(self, path, _optional_path(getattr(self, path), path))
            if getattr(self, path) is not None and not self.ssl:  # never plain text believed TLS
                raise InvalidArgumentError(path, "is a TLS option, and TLS is off (rediss://, or ssl=True)")
        if self.ssl_keyfile is not None and self.ssl_certfile is None:  # it would be left out in silence
            raise InvalidArgumentError("ssl_keyfile", "comes without ssl_certfile, the certificate it is "
                                                      "the key of")
        object.__setattr__(self, "ssl_cert_reqs", _cert_reqs_name(self.ssl_cert_reqs))
        object.__setattr__(self, "connect_timeout", positive_seconds(self.connect_timeout, "connect_timeout"))
        object.__setattr__(self, "timeout", positive_seconds(self.timeout, "timeout"))
        _check_int(self.replicas_ack, "replicas_ack")
        if not 0 <= self.replicas_ack <= MAX_C_INT:  # WAIT's count is a C int too
            raise InvalidArgumentError("replicas_ack", f"must be an int from 0 to {MAX_C_INT} (0: no waiting "
                                                       "for replicas)")
        replicas_timeout = positive_seconds(self.replicas_timeout, "replicas_timeout")
        if self.replicas_ack and replicas_timeout >= self.timeout:
            raise InvalidArgumentError("replicas_timeout", "must be shorter than timeout (a call's deadline)")
        object.__setattr__(self, "replicas_timeout", replicas_timeout)
        if self.ssl and not self.insecure:
            if self.ssl_cert_reqs != "required":
                raise InvalidArgumentError(
                    "ssl_cert_reqs", "TLS without certificate verification needs insecure=True")
            if not self.ssl_check_hostname:
                raise InvalidArgumentError(
                    "ssl_check_hostname", "TLS without host name verification needs insecure=True")

    @property
    def address(self) -> str:
        """Where the server is, for messages (no credentials)."""
        if self.unix_socket_path is not None:
            return f"unix:{self.unix_socket_path}"
        return f"{self.host}:{self.port}"

    def ssl_context(self) -> _ssl.SSLContext:
        """The TLS context of a new connection; a file it cannot load is an ``InvalidArgumentError``
        naming its option (not a failure to reach the server, retried until the call's deadline)."""
        try:
            context = _ssl.create_default_context(cafile=self.ssl_ca_certs)
        except OSError as exc:  # ssl.SSLError too: a file that holds no certificate
            raise InvalidArgumentError("ssl_ca_certs", _unloadable(self.ssl_ca_certs, exc)) from None
        if self.ssl_certfile:
            # An encrypted key without ssl_password fails to load: OpenSSL is never left to ask
            # for the passphrase on a terminal (a service would hang on it).
            password = self.ssl_password
            try:
                context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile,
                                        password=password if password is not None else _no_passphrase)
            except OSError as exc:
                raise self._unloadable_pair(exc) from None
        if self.insecure:
            context.check_hostname = self.ssl_check_hostname and self.ssl_cert_reqs == "required"
            context.verify_mode = _CERT_REQS[self.ssl_cert_reqs]
        return context

    def _unloadable_pair(self, exc: OSError) -> InvalidArgumentError:
        """Which of the client certificate, its key or the key's passphrase did not load."""
        cert, key = self.ssl_certfile, self.ssl_keyfile or self.ssl_certfile
        if not os.path.exists(cert or ""):
            return InvalidArgumentError("ssl_certfile", _unloadable(cert, exc))
        if not os.path.exists(key or ""):
            return InvalidArgumentError("ssl_keyfile", _unloadable(key, exc))
        if self.ssl_password is None and _encrypted(key):
            return InvalidArgumentError("ssl_password", f"the key {key!r} is encrypted: give its passphrase")
        return InvalidArgumentError("ssl_certfile", _unloadable(cert, exc) + f" (with the key {key!r})")

    def with_changes(self, **changes: Any) -> ConnectionOptions:
        """A copy with ``changes`` (turbolock's or redis-py's keyword names), checked like new options."""
        return _build({f.name: getattr(self, f.name) for f in fields(self)}, changes)


def _encrypted(path: str | None) -> bool:
    try:
        with open(path or "", "rb") as pem:
            return b"ENCRYPTED" in pem.read(1 << 16)
    except OSError:
        return False


def _unloadable(path: str | None, exc: OSError) -> str:
    reason = exc.reason if isinstance(exc, _ssl.SSLError) else exc.strerror
    return f"{path!r} cannot be loaded: {reason or exc}"


def _check_str(value: object, argument: str) -> None:
    if not isinstance(value, str):
        raise InvalidArgumentTypeError(argument, f"must be str, not {type(value).__name__}")


_NOT_IN_A_HOST = re.compile(r"[\s\x00-\x1f\x7f/@]")


def check_host(host: object, argument: str) -> None:
    """A host name or an IP address. A URL given as a host (the common slip for ``from_url``)
    is refused without quoting it: it may hold a password."""
    if not isinstance(host, str):
        raise InvalidArgumentTypeError(argument, f"must be str, not {type(host).__name__}")
    if not host.strip():
        raise InvalidArgumentError(argument, "must not be empty")
    if _NOT_IN_A_HOST.search(host):
        raise InvalidArgumentError(argument, "must be a host name or an IP address (no '/', '@', spaces or "
                                             "control characters); a URL goes to from_url")


def _check_int(value: object, argument: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentTypeError(argument, f"must be an int, not {type(value).__name__}")


def _optional_path(value: object, argument: str) -> str | None:
    """None, or a file path as str (``pathlib.Path`` and other ``os.PathLike[str]`` too)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        path = os.fspath(value)
        if isinstance(path, str):
            return path
    raise InvalidArgumentTypeError(argument, f"must be a str path, not {type(value).__name__}")


def _cert_reqs_name(value: object) -> str:
    """"none", "optional" or "required", from any case or from ``ssl.CERT_*`` (redis-py takes both;
    None is its "none")."""
    if value is None:
        return "none"
    if isinstance(value, _ssl.VerifyMode):
        return _CERT_REQS_NAMES[value]
    if not isinstance(value, str):
        raise InvalidArgumentTypeError("ssl_cert_reqs",
                                       f"must be str or ssl.VerifyMode, not {type(value).__name__}")
    name = value.lower()
    if name not in _CERT_REQS:
        raise InvalidArgumentError("ssl_cert_reqs", "must be 'none', 'optional' or 'required'")
    return name


_OPTION_NAMES = frozenset(f.name for f in fields(ConnectionOptions))

REDIS_PY_NAMES = {
    "socket_timeout": "timeout",
    "socket_connect_timeout": "connect_timeout",
    "path": "unix_socket_path",
}
"""redis-py's keyword names that differ from turbolock's. Its other connection keywords (``host``,
``port``, ``db``, ``username``, ``password``, ``unix_socket_path``, ``ssl`` and ``ssl_*``) are
turbolock's names as well."""


def _option_keywords(keywords: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``keywords`` under turbolock's names, and which redis-py name each renamed one came as.

    An unknown keyword, or one option given under both names, is refused.
    """
    options: dict[str, Any] = {}
    renamed: dict[str, str] = {}
    for name, value in keywords.items():
        target = REDIS_PY_NAMES.get(name, name)
        if target not in _OPTION_NAMES:
            raise InvalidArgumentTypeError(name, _unknown_keyword(name))
        if target in options:
            first = renamed.get(target, target)
            raise InvalidArgumentError(
                name, f"{first} and {name} are the same option; give only one of them")
        options[target] = value
        if target != name:
            renamed[target] = name
    return options, renamed


def _unknown_keyword(name: str) -> str:
    known = sorted(_OPTION_NAMES | REDIS_PY_NAMES.keys())
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; connection options are {', '.join(known)}"
    return f"unexpected keyword argument{hint}"


def _build(base: dict[str, Any], keywords: dict[str, Any]) -> ConnectionOptions:
    """``ConnectionOptions`` from ``base`` (turbolock's names) overridden by the caller's ``keywords``
    (either library's names); an error about a renamed keyword names it as the caller wrote it."""
    overrides, renamed = _option_keywords(keywords)
    try:
        return ConnectionOptions(**{**base, **overrides})
    except (InvalidArgumentError, InvalidArgumentTypeError) as exc:
        alias = renamed.get(exc.argument)
        if alias is None:
            raise
        message = str(exc).removeprefix(f"{exc.argument}: ")
        raise type(exc)(alias, message) from None


def _no_passphrase() -> bytes:
    return b""


def options_from_keywords(**keywords: Any) -> ConnectionOptions:
    """``ConnectionOptions`` from keywords, under turbolock's names or redis-py's
    (``socket_timeout``, ``socket_connect_timeout``, ``path``); an unknown keyword is an
    ``InvalidArgumentTypeError`` naming it."""
    return _build({}, keywords)


CLIENT_URL_OPTIONS = ("replicas_ack", "replicas_timeout", "wake_waiters")
"""Query options of a turbolock URL that are the client's, unknown to redis-py's connections."""


_URL_KEYS = {
    "socket_timeout": "timeout",
    "socket_connect_timeout": "connect_timeout",
    "timeout": "timeout",
    "connect_timeout": "connect_timeout",
    "ssl_ca_certs": "ssl_ca_certs",
    "ssl_certfile": "ssl_certfile",
    "ssl_keyfile": "ssl_keyfile",
    "ssl_cert_reqs": "ssl_cert_reqs",
    "ssl_check_hostname": "ssl_check_hostname",
    "ssl_password": "ssl_password",
    "username": "username",
    "password": "password",
    **{name: name for name in CLIENT_URL_OPTIONS},
}
"""A URL's query options turbolock applies, under redis-py's names or its own: what each sets
(``unix:///path?db=0&password=...``, redis-py's form for a socket's credentials, included)."""

_SECRETS = frozenset(("username", "password", "ssl_password"))
"""Query options an empty value may mean something for (a ``nopass`` user takes any password)."""

REDIS_PY_TUNING = frozenset(("socket_keepalive", "socket_read_size", "retry_on_timeout", "retry_on_error",
                             "health_check_interval", "max_connections", "protocol", "legacy_responses"))
"""redis-py's own query options that tune redis-py's connections: accepted in a URL shared with
redis-py, and without effect here (turbolock keeps its connections its own way)."""

_TLS_URL_KEYS = frozenset(name for name in _URL_KEYS if name.startswith("ssl_"))

_TURBOLOCK_URL_NAMES = {"timeout": "socket_timeout", "connect_timeout": "socket_connect_timeout"}
"""Query options redis-py knows under another name (``redis_py_url`` renames them)."""


def redis_py_url(url: str) -> str:
    """``url`` for redis-py itself (the operator tools' own connections): without the client's
    query options (``CLIENT_URL_OPTIONS``), which redis-py would hand its connections as keywords,
    and with turbolock's names of the timeouts made redis-py's."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = [(_TURBOLOCK_URL_NAMES.get(k, k), v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if k not in CLIENT_URL_OPTIONS]
    # Rebuilt by hand: urlunsplit makes ``unix:///path`` (no netloc) ``unix:/path``, which redis-py refuses.
    head = url.split("?", 1)[0]
    encoded = urlencode(query)
    return f"{head}?{encoded}" if encoded else head


def options_from_url(url: str, **overrides: Any) -> ConnectionOptions:
    """``redis://``, ``rediss://`` or ``unix://`` URL, as redis-py reads it; keywords win.

    Unlike redis-py, a path that is not a db number (``redis://host/abc``), an empty host, an
    unknown query option and a TLS option on a URL without TLS are refused, not passed over.
    """
    if not isinstance(url, str):
        raise InvalidArgumentTypeError("url", f"must be str, not {type(url).__name__}")
    # Each parser's error is raised from outside its except block: urllib's message may quote
    # part of the password, and would stay in the exception's __context__ ("from None" only
    # hides it from the default traceback).
    problem = None
    try:
        parts = urlsplit(url)
        scheme = parts.scheme
        port = parts.port if scheme != "unix" else None
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        raise InvalidArgumentError("url", _unparsable(problem, url))
    if scheme not in ("redis", "rediss", "unix"):
        raise InvalidArgumentError("url", f"unknown scheme {scheme!r}; use redis://, rediss:// or unix://")
    if scheme != "unix" and not parts.hostname:
        raise InvalidArgumentError("host", f"the URL names no host ({scheme}://host:port/db)")
    if scheme == "unix" and not parts.path:  # not a TCP client of the default host and port
        raise InvalidArgumentError("url", "the unix:// URL names no socket path (unix:///path/to/redis.sock)")
    _check_query(parts.query, url, scheme)
    from redis.connection import parse_url

    try:
        parsed: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        raise InvalidArgumentError("url", _unparsable(problem, url))
    kwargs: dict[str, Any] = {}
    for key in ("host", "port", "db", "username", "password"):
        if parsed.get(key) is not None:
            kwargs[key] = parsed[key]
    if port is not None:
        kwargs["port"] = port  # redis-py reads port 0 as "no port" and goes to 6379
    if scheme != "unix":
        path_db = _db_from_path(parts.path, url)
        if "db" not in parse_qs(parts.query):  # db=N in the query wins over the path, as in redis-py
            kwargs.pop("db", None)
            if path_db is not None:
                kwargs["db"] = path_db
    if "path" in parsed:
        kwargs["unix_socket_path"] = parsed["path"]
    if scheme == "rediss":
        kwargs["ssl"] = True
    for source, target in _URL_KEYS.items():
        if parsed.get(source) is not None:
            kwargs[target] = parsed[source]
    for name, read in (("replicas_ack", int), ("replicas_timeout", float), ("connect_timeout", float)):
        if isinstance(kwargs.get(name), str):
            kwargs[name] = _number_in_url(kwargs[name], name, read, url)
    if isinstance(kwargs.get("wake_waiters"), str):
        kwargs["wake_waiters"] = _flag_in_url(kwargs["wake_waiters"], "wake_waiters", url)
    for name, text in parse_qsl(parts.query):  # as written: redis-py reads "off" as true
        if name == "ssl_check_hostname":
            kwargs[name] = _flag_in_url(text, name, url)
    return _build(kwargs, overrides)


def _check_query(query: str, url: str, scheme: str) -> None:
    """Every query option is one turbolock applies or one of redis-py's tuning options; TLS
    options only on a ``rediss://`` URL."""
    given: dict[str, str] = {}
    values: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if not value and name not in _SECRETS:  # redis-py drops it: a templated ``${N}`` left empty
            raise InvalidArgumentError(name, "has no value in the URL; give one, or leave the option out")
        if values.setdefault(name, value) != value:  # redis-py would take the first one silently
            raise InvalidArgumentError(name, "is given twice with different values; give it once")
        target = _URL_KEYS.get(name)
        if target is not None and given.setdefault(target, name) != name:
            raise InvalidArgumentError(name, f"{given[target]} and {name} are the same option; give only one")
        if name in _TLS_URL_KEYS and scheme != "rediss":
            raise InvalidArgumentError(name, "is a TLS option, and this URL is not rediss://")
        if name in _URL_KEYS or name in REDIS_PY_TUNING or name == "db":
            continue
        known = sorted({*_URL_KEYS, "db"})
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"the options are {', '.join(known)}"
        raise InvalidArgumentError("url", f"unknown query option {_shown(name, url)}; {hint}")


def _shown(text: str, url: str) -> str:
    """``text`` taken from ``url``, quoted for a message, unless the URL holds credentials: a
    password that holds ``/``, ``#``, ``?`` or ``@`` unencoded spills into the parts after it
    (the port, the path, the query), so nothing from such a URL is quoted back."""
    if _holds_credentials(url):
        return "(not shown: the URL holds credentials)"
    shown = text if len(text) <= 40 else text[:40] + "..."
    return repr(shown)


def _number_in_url(text: str, name: str, read: Any, url: str) -> Any:
    try:
        return read(text)
    except ValueError:
        pass  # raised below, without this error as its context: it quotes ``text``
    raise InvalidArgumentError(name, f"the URL's {name} must be a number, not {_shown(text, url)}")


def _flag_in_url(text: str, name: str, url: str) -> bool:
    word = text.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise InvalidArgumentError(name, f"the URL's {name} must be true or false, not {_shown(text, url)}")


def _db_from_path(path: str, url: str) -> int | None:
    """The db number of a ``redis://`` URL's path (``/3``), or None for no path (``/`` or none)."""
    text = unquote(path).removeprefix("/")
    if not text:
        return None
    if not (text.isascii() and text.isdigit()):
        raise InvalidArgumentError("db", f"the URL's path must be a db number (redis://host:port/3), "
                                         f"not {_shown(text, url)}{_ENCODE_HINT if '@' in url else ''}")
    return int(text)


_ENCODE_HINT = "; percent-encode '/', '#', '?' and '@' in a password"


def _holds_credentials(url: str) -> bool:
    return "@" in url or "password=" in url


def _unparsable(message: str, url: str) -> str:
    """The URL parser's ``message``, unless the URL holds credentials (see ``_shown``)."""
    if _holds_credentials(url):
        return f"the URL cannot be read{_ENCODE_HINT}"
    return message


def options_from_redis(client: Any, **overrides: Any) -> ConnectionOptions:
    """Take over host, port or socket path, db, credentials, TLS and timeouts of a ``redis.Redis``;
    keywords win."""
    pool = getattr(client, "connection_pool", None)
    if pool is None or not hasattr(pool, "connection_kwargs"):
        raise InvalidArgumentTypeError("client", f"must be a redis.Redis, not {type(client).__name__}")
    source = dict(pool.connection_kwargs)
    if not source.get("path") and "host" not in source:  # a SentinelConnectionPool asks for each connection
        raise InvalidArgumentError("client", f"its {type(pool).__name__} keeps no server address (redis-py's "
                                   "Sentinel.master_for()); use SentinelLockClient, which follows the master")
    kwargs: dict[str, Any] = {"db": source.get("db") or 0}
    if source.get("path"):
        kwargs["unix_socket_path"] = source["path"]
    else:
        kwargs["host"] = source.get("host", "127.0.0.1")
        kwargs["port"] = int(source.get("port", 6379))
    for key in ("username", "password", "credential_provider"):  # the provider asked per connection
        if source.get(key) is not None:
            kwargs[key] = source[key]
    if source.get("socket_timeout"):
        kwargs["timeout"] = source["socket_timeout"]
    if source.get("socket_connect_timeout"):
        kwargs["connect_timeout"] = source["socket_connect_timeout"]
    if "ssl_cert_reqs" in source or pool.connection_class.__name__.endswith("SSLConnection"):
        kwargs["ssl"] = True
        for key in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_check_hostname"):
            if source.get(key) is not None:
                kwargs[key] = source[key]
        kwargs["ssl_cert_reqs"] = source.get("ssl_cert_reqs", "required")
    return _build(kwargs, overrides)


_NODE_SETTINGS = {
    "sentinels": "the Sentinels' credentials are sentinel_username= and sentinel_password=, TLS and the "
                 "rest the client's keywords",
    "startup_nodes": "credentials, TLS and the rest come from the client's own URL or keywords",
}


def node_hint(node: str) -> str:
    """What to say first of a bad URL in a list: a bare host:port is a common slip."""
    return "" if "://" in node else "items are URLs (redis://host:port) or (host, port) pairs; "


def node_address(node: object, argument: str) -> tuple[str, int]:
    """(host, port) of one node given as a URL or a (host, port) pair (cluster start-up nodes,
    Sentinels); ``argument`` names the list in the error."""
    if isinstance(node, str):
        try:
            options = options_from_url(node)
        except (InvalidArgumentError, InvalidArgumentTypeError) as exc:  # "url: ...": the list's name
            reason = str(exc).removeprefix("url: ")
            raise type(exc)(argument, node_hint(node) + reason) from None
        if options.unix_socket_path is not None:
            raise InvalidArgumentError(argument, "items are reached over TCP: redis:// URLs or (host, port)")
        if (options.username, options.password, options.db, options.ssl) != (None, None, 0, False) \
                or urlsplit(node).query:
            # Dropped here, they would be believed used: credentials and TLS are the client's keywords.
            raise InvalidArgumentError(argument, "a URL here gives a host and port only (redis://host:port); "
                                                 + _NODE_SETTINGS.get(argument, "the rest goes in keywords"))
        return options.host, options.port
    if (isinstance(node, tuple) and len(node) == 2 and isinstance(node[0], str)
            and type(node[1]) is int and 0 < node[1] < 65536):
        check_host(node[0], argument)
        return node[0], node[1]
    # The item's type alone: a URL given as bytes or a (host, port, password) carries a secret.
    raise InvalidArgumentTypeError(argument, f"items must be URLs or (host, port) pairs, not a "
                                             f"{type(node).__name__}")
