"""A new connection's first commands and the check of their replies: the same for every driver.

AUTH, SELECT, PING and HELLO go out in one write; the replies prove that the peer is a Redis
server that accepted the credentials, before any lock command is sent, and HELLO's names the
server and its version (whether it offers ``SET ... IFEQ``: ``_wire.set_ifeq``).
"""

from __future__ import annotations

from typing import Any

from turbolock._wire import set_ifeq
from turbolock.errors import (
    AuthenticationError,
    ConnectionError,
    ProtocolError,
    ReplyError,
    ResponseError,
    TimeoutError,
)
from turbolock.options import ConnectionOptions


def append_handshake(buffer: Any, options: ConnectionOptions) -> int:
    """Queue a new connection's commands (AUTH with credentials, SELECT for a db other than 0,
    then PING and HELLO 2) and return how many there are.

    The PING costs nothing extra (it shares the round trip) and proves the server speaks RESP
    as Redis does: an echo or HTTP server on the port is found here, not by a lock call. HELLO 2
    (the protocol in use) says which server it is; one without HELLO answers an error, as does a
    user not allowed it, and is taken as a server without ``SET ... IFEQ``.
    """
    count = 2
    username, password = credentials(options)
    if password is not None:
        if username:
            buffer.append_command(("AUTH", username, password))
        else:
            buffer.append_command(("AUTH", password))
        count += 1
    if options.db:
        buffer.append_command(("SELECT", options.db))
        count += 1
    buffer.append_command(("PING",))
    buffer.append_command(("HELLO", "2"))
    return count


def credentials(options: ConnectionOptions) -> tuple[str | None, str | None]:
    """(username, password) for a new connection: a credential provider's, asked now, else the
    options' own."""
    provider = options.credential_provider
    if provider is None:
        return options.username, options.password
    failure = None
    try:
        given = tuple(provider.get_credentials())
    except Exception as exc:  # raised below, not quoted nor chained: it may hold what it fetched
        failure = type(exc).__name__
    if failure is not None:
        raise AuthenticationError(f"{options.address}: the credential provider failed ({failure})")
    username, password = (None, *given) if len(given) == 1 else given  # redis-py's (password,): no username
    if not isinstance(password, str):
        raise AuthenticationError(f"{options.address}: the credential provider gave no password")
    return username or None, password  # redis-py sends AUTH username password, "" included


def check_handshake(options: ConnectionOptions, replies: list[object]) -> bool:
    """Raise unless ``replies`` (to ``append_handshake``'s commands) are a Redis server's;
    return whether that server offers ``SET ... IFEQ``.

    Refused credentials and a refused SELECT are reported as such; PING may be refused to an
    ACL user without ``+ping`` (NOPERM), which still proves a Redis answered. Nothing the server
    sent is quoted: an echo server sends the AUTH command, password included, back.
    """
    address = options.address
    refusal = refused(address, replies[0]) if replies else None
    if refusal is not None:
        raise refusal
    replies = list(replies)
    if options.password is not None or options.credential_provider is not None:
        auth_reply = replies.pop(0)
        if isinstance(auth_reply, ReplyError):
            who = (f"user {options.username!r}" if options.username else "the credential provider's user"
                   if options.credential_provider is not None else "the default user")
            raise AuthenticationError(f"{address} refused the credentials of {who}: {auth_reply.code}")
        _expect(options, "AUTH", auth_reply, b"OK")
    if options.db:
        select_reply = replies.pop(0)
        if isinstance(select_reply, ReplyError):
            code = select_reply.code
            if code == "NOAUTH":
                raise AuthenticationError(f"{address} wants credentials (NOAUTH) before SELECT {options.db}")
            raise ResponseError(f"{address} refused SELECT {options.db}: {select_reply}", code)
        _expect(options, "SELECT", select_reply, b"OK")
    ping_reply = replies.pop(0)
    if isinstance(ping_reply, ReplyError):
        code = ping_reply.code
        if code in ("NOAUTH", "WRONGPASS"):
            raise AuthenticationError(f"{address} wants credentials ({code})")
        if code != "NOPERM":
            raise ResponseError(f"{address} refused PING: {ping_reply}", code)
    else:
        _expect(options, "PING", ping_reply, b"PONG")
    return set_ifeq.offers(replies.pop(0))


REFUSED = "max number of clients reached"


def refused(address: str, reply: object) -> ConnectionError | None:
    """The error for a server that refused the connection itself (``maxclients`` reached): Redis
    sends this error before reading anything, then hangs up, whatever the commands were. A
    condition of the server that passes, as a refused connection does, so a ``ConnectionError``
    (a blocking acquire goes on waiting), never a verdict on the credentials or the protocol."""
    if type(reply) is ReplyError and REFUSED in str(reply):
        return ConnectionError(f"{address} refused the connection: {reply}")
    return None


def handshake_timeout(options: ConnectionOptions, limit: float) -> TimeoutError:
    """The error for a server that accepted a connection and then kept silent."""
    return TimeoutError(f"{options.address} accepted a connection but did not answer its first "
                        f"commands within {limit:.3g}s")


def _expect(options: ConnectionOptions, command: str, reply: object, expected: bytes) -> None:
    if reply != expected:
        raise not_redis(options, f"it answered {command} with {_kind_of(reply)}")


def not_redis(options: ConnectionOptions, detail: str) -> ProtocolError:
    """The error for a server that answered the handshake, but not as Redis does."""
    return ProtocolError(f"{options.address} does not speak RESP as Redis does ({detail}); "
                         "is it the address of a Redis server?")


def _kind_of(reply: object) -> str:
    """What a reply is, never what it says."""
    if isinstance(reply, list):
        return f"an array of {len(reply)}"
    if isinstance(reply, bytes):
        return f"a {len(reply)}-byte string"
    if isinstance(reply, int):
        return "an integer"
    if reply is None:
        return "nil"
    return f"a {type(reply).__name__}"
