"""Opening one asyncio connection: TCP or a unix socket, TLS by the loop's ssl support, then
AUTH, SELECT and PING, all within the connect timeout. Errors are the blocking client's."""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
from typing import Any

from turbolock._aio.protocol import RedisProtocol
from turbolock._aio.waiting import run_within
from turbolock._flows.bulk_plan import OrphanHandler
from turbolock._flows.handshake import append_handshake, check_handshake, handshake_timeout, not_redis
from turbolock._wire.outcomes import NotSent
from turbolock.errors import ConnectionError, ProtocolError, ResponseError, TimeoutError
from turbolock.options import ConnectionOptions


async def open_connection(options: ConnectionOptions, core: Any, key_prefix: bytes,
                          on_orphan: OrphanHandler) -> RedisProtocol:
    """A connected, authenticated protocol with the right db selected, to a server that answered PING."""
    loop = asyncio.get_running_loop()
    limit = min(options.connect_timeout, options.timeout)
    deadline = loop.time() + limit
    try:
        opened, protocol = await run_within(_open(loop, options, core, key_prefix, on_orphan), limit,
                                            functools.partial(_close, options))
    except (TimeoutError, ConnectionError, ResponseError):
        raise
    except ssl.SSLError as exc:
        raise ConnectionError(f"TLS handshake with {options.address} failed: {exc.reason or exc}") from None
    except OSError as exc:
        raise ConnectionError(f"cannot connect to {options.address}: {exc.strerror or exc}") from None
    if not opened or protocol is None:
        raise TimeoutError(f"connecting to {options.address} timed out after {limit:.3g}s")
    try:
        shook, _ = await run_within(_handshake(protocol, options), deadline - loop.time())
        if not shook:
            raise handshake_timeout(options, limit)
    except BaseException:
        protocol.close(ConnectionError(f"connection to {options.address} is closed"))
        raise
    return protocol


def _close(options: ConnectionOptions, protocol: RedisProtocol) -> None:
    """A connection opened for a caller gone meanwhile (cancelled, closed, out of time)."""
    protocol.close(ConnectionError(f"connection to {options.address} is closed"))


async def _open(loop: asyncio.AbstractEventLoop, options: ConnectionOptions, core: Any, key_prefix: bytes,
                on_orphan: OrphanHandler) -> RedisProtocol:
    def factory() -> RedisProtocol:
        return RedisProtocol(loop, core, key_prefix, options.address, options.timeout, on_orphan)

    context = options.ssl_context() if options.ssl else None
    if options.unix_socket_path is not None:
        _, protocol = await loop.create_unix_connection(factory, options.unix_socket_path, ssl=context,
                                                        server_hostname=options.host if context else None)
    else:
        transport, protocol = await loop.create_connection(
            factory, options.host, options.port, ssl=context,
            server_hostname=options.host if context else None)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, AttributeError):  # uvloop's socket stand-in; it sets TCP_NODELAY itself
                pass
    return protocol


async def _handshake(protocol: RedisProtocol, options: ConnectionOptions) -> None:
    """AUTH and SELECT when needed, then PING and HELLO, in one round trip: proof that a Redis
    answers, and whether it offers ``SET ... IFEQ``."""
    count = append_handshake(protocol.buffer, options)
    try:
        reply = await protocol.submit(count)
    except NotSent as exc:
        raise exc.cause from None
    except ProtocolError as exc:
        raise not_redis(options, f"its reply is not RESP: {exc}") from None
    protocol.set_ifeq = check_handshake(options, reply if count > 1 else [reply])
