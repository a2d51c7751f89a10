"""Opening one asyncio connection: TCP or a unix socket, TLS by the loop's ssl support, then
AUTH and SELECT, all within the connect timeout. Errors are the blocking client's, word for word."""

from __future__ import annotations

import asyncio
import builtins
import socket
import ssl
from typing import Any

from ..errors import AuthenticationError, ConnectionError, ReplyError, ResponseError, TimeoutError
from ..options import ConnectionOptions
from .protocol import NotSent, OrphanHandler, RedisProtocol


async def open_connection(options: ConnectionOptions, core: Any, key_prefix: bytes,
                          on_orphan: OrphanHandler) -> RedisProtocol:
    """A connected, authenticated protocol with the right db selected."""
    loop = asyncio.get_running_loop()
    limit = min(options.connect_timeout, options.timeout)
    try:
        return await asyncio.wait_for(_open(loop, options, core, key_prefix, on_orphan), limit)
    except (TimeoutError, ConnectionError, ResponseError):
        raise
    except builtins.TimeoutError:  # asyncio.TimeoutError is the builtin one from 3.11 on
        raise TimeoutError(f"connecting to {options.address} timed out after {limit:.3g}s") from None
    except asyncio.TimeoutError:
        raise TimeoutError(f"connecting to {options.address} timed out after {limit:.3g}s") from None
    except ssl.SSLError as exc:
        raise ConnectionError(f"TLS handshake with {options.address} failed: {exc.reason or exc}") from None
    except OSError as exc:
        raise ConnectionError(f"cannot connect to {options.address}: {exc.strerror or exc}") from None


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
    try:
        await _handshake(protocol, options)
    except BaseException:
        protocol.close(ConnectionError(f"connection to {options.address} is closed"))
        raise
    return protocol


async def _handshake(protocol: RedisProtocol, options: ConnectionOptions) -> None:
    buf = protocol.buffer
    expected = 0
    if options.password is not None:
        if options.username:
            buf.append_command(("AUTH", options.username, options.password))
        else:
            buf.append_command(("AUTH", options.password))
        expected += 1
    if options.db:
        buf.append_command(("SELECT", options.db))
        expected += 1
    if not expected:
        return
    try:
        reply = await protocol.submit(expected)
    except NotSent as exc:
        raise exc.cause from None
    replies: list[object] = reply if expected > 1 else [reply]
    if options.password is not None:
        auth_reply = replies.pop(0)
        if isinstance(auth_reply, ReplyError):
            who = f"user {options.username!r}" if options.username else "the default user"
            raise AuthenticationError(
                f"{options.address} refused the credentials of {who}: {auth_reply.code}")
    if options.db and isinstance(replies[0], ReplyError):
        select_reply = replies[0]
        code = select_reply.code
        if code == "NOAUTH":
            raise AuthenticationError(
                f"{options.address} wants credentials (NOAUTH) before SELECT {options.db}")
        raise ResponseError(f"{options.address} refused SELECT {options.db}: {select_reply}", code)
