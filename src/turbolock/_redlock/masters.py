"""The masters of a Redlock: opened from URLs or taken as clients, and refused unless they are
at least three distinct servers sharing one key prefix.

Distinct means distinct processes: two URLs that resolve to one address (``localhost`` and
``127.0.0.1``), or two databases of one server, fail together, and a quorum over them is no
quorum. Host names are resolved here, once, before anything is sent.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from turbolock._flows.client_settings import DEFAULT_KEY_PREFIX, check_chunk_size
from turbolock._flows.redlock_result import master_names
from turbolock._wire.core import get_core
from turbolock._wire.validate import check_key_prefix
from turbolock.errors import InvalidArgumentError, InvalidArgumentTypeError
from turbolock.options import ConnectionOptions, options_from_url

MIN_MASTERS = 3

C = TypeVar("C")

Endpoint = tuple[str, str, int]


def endpoints(options: ConnectionOptions) -> frozenset[Endpoint]:
    """Every address ``options`` may reach: ("unix", real path, 0) or ("tcp", ip, port)."""
    if options.unix_socket_path is not None:
        return frozenset({("unix", os.path.realpath(options.unix_socket_path), 0)})
    try:
        infos = socket.getaddrinfo(options.host, options.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return frozenset({("tcp", options.host.lower(), options.port)})
    found: set[Endpoint] = set()
    for _, _, _, _, sockaddr in infos:
        found.add(("tcp", _canonical_ip(str(sockaddr[0])), options.port))
    return frozenset(found)


def _canonical_ip(text: str) -> str:
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_unspecified:  # connecting to 0.0.0.0 or :: reaches this host's loopback
        ip = ipaddress.ip_address("127.0.0.1" if ip.version == 4 else "::1")
    return str(ip)


def _check_list(masters: object, client_type: type[Any]) -> list[Any]:
    kind = client_type.__name__
    if isinstance(masters, str | bytes) or not isinstance(masters, Sequence):
        raise InvalidArgumentTypeError("masters", f"must be a list of URLs or {kind}s")
    items = list(masters)
    for item in items:
        if not isinstance(item, str | client_type):
            raise InvalidArgumentTypeError(
                "masters", f"must hold URLs (str) or {kind}s, not {type(item).__name__}")
    if len(items) < MIN_MASTERS:
        raise InvalidArgumentError(
            "masters", f"has {len(items)}; a Redlock needs at least {MIN_MASTERS} independent masters "
                       "(a majority of fewer survives no failure)")
    return items


def _common_prefix(items: list[Any], key_prefix: str | bytes | None, client_type: type[Any]) -> bytes:
    given: set[bytes] = {item.key_prefix for item in items if isinstance(item, client_type)}
    if key_prefix is not None:
        prefix = check_key_prefix(key_prefix)
        if given - {prefix}:
            raise InvalidArgumentError(
                "key_prefix", f"differs from the key prefix of a {client_type.__name__} in masters; every "
                              "master "
                              "must use the same keys")
        return prefix
    if len(given) > 1:
        raise InvalidArgumentError("masters", f"the {client_type.__name__}s use different key prefixes; a "
                                              "Redlock "
                                              "needs the same keys on every master")
    return given.pop() if given else check_key_prefix(DEFAULT_KEY_PREFIX)


def _check_distinct(options: list[ConnectionOptions]) -> None:
    seen: list[frozenset[Endpoint]] = []
    for i, opts in enumerate(options):
        mine = endpoints(opts)
        for j, theirs in enumerate(seen):
            shared = mine & theirs
            if shared:
                kind, where, port = sorted(shared)[0]
                address = where if kind == "unix" else f"{where}:{port}"
                raise InvalidArgumentError(
                    "masters", f"masters[{j}] ({options[j].address}) and masters[{i}] ({opts.address}) are "
                               f"the same server ({address}); a Redlock needs independent servers, and two "
                               "databases of one server fail together")
        seen.append(mine)


def open_masters(masters: object, key_prefix: str | bytes | None, client_type: type[C],
                 open_master: Callable[[ConnectionOptions, bytes], C],
                 connection: dict[str, Any]) -> tuple[list[C], list[C], bytes]:
    """(every master's client, the clients opened here and so closed by us, the key prefix).

    ``masters`` holds URLs and clients of ``client_type``; ``open_master(options, key_prefix)``
    makes the client of a URL. Everything is checked before a client is made; a URL's
    ``connection`` keywords apply to URLs only.
    """
    items = _check_list(masters, client_type)
    prefix = _common_prefix(items, key_prefix, client_type)
    options = [options_from_url(item, **connection) if isinstance(item, str) else item.options
               for item in items]
    _check_distinct(options)
    if any(opts.replicas_ack for opts in options):
        raise InvalidArgumentError("replicas_ack", "is not for Redlock: its safety comes from a majority of "
                                                   "independent masters, not from their replicas")
    clients: list[C] = []
    opened: list[C] = []
    for item, opts in zip(items, options, strict=True):
        if isinstance(item, client_type):
            clients.append(item)
        else:
            client = open_master(opts, prefix)
            clients.append(client)
            opened.append(client)
    return clients, opened, prefix


def take_masters(client: Any, masters: object, key_prefix: str | bytes | None, core: str | None,
                 chunk_size: int, client_type: type[Any], connection: dict[str, Any]) -> None:
    """Give a Redlock ``client`` its masters: clients of ``client_type`` as given, URLs opened here
    (and so closed by the Redlock client) with ``key_prefix``, ``core``, ``chunk_size`` and the
    ``connection`` keywords; then its quorum, key prefix and core."""
    chunk = check_chunk_size(chunk_size)
    chosen_core = get_core(core) if core is not None else None

    def open_master(options: ConnectionOptions, prefix: bytes) -> Any:
        return client_type(options=options, key_prefix=prefix, core=core, chunk_size=chunk)

    clients, opened, prefix = open_masters(masters, key_prefix, client_type, open_master, connection)
    client._chunk_size = chunk
    client.masters = tuple(clients)
    client.master_names = master_names(clients)
    client.quorum = len(clients) // 2 + 1
    client._opened = opened
    client.key_prefix = prefix
    client.core = chosen_core if chosen_core is not None else clients[0].core
