"""One blocking connection to one server: a socket, a core parser and a core command buffer.

A connection moves bytes and nothing else: commands are encoded by the core's
``CommandBuffer`` and replies decoded by its ``RespParser``. Any failure after bytes were
sent leaves replies unaccounted for, so the connection is closed and never reused.
"""

from __future__ import annotations

import builtins
import os
import socket
import ssl
import struct
import time
from types import ModuleType
from typing import Any

from turbolock._flows.handshake import (
    append_handshake,
    check_handshake,
    handshake_timeout,
    not_redis,
    refused,
)
from turbolock._wire.outcomes import NotSent
from turbolock._wire.ready import readable
from turbolock.errors import (
    ConnectionError,
    ProtocolError,
    TimeoutError,
    UnsentTimeoutError,
)
from turbolock.options import ConnectionOptions

_READ_SIZE = 65536
# Below this much less than a full deadline, the kernel timeout is not worth re-arming.
_TIMEOUT_SLACK = 0.001


class Connection:
    __slots__ = ("options", "buffer", "parser", "sock", "generation", "last_used", "broken", "tls",
                 "handshake", "dialing", "kernel_timeout", "set_ifeq", "_read_buf", "_read_view", "written")

    def __init__(self, options: ConnectionOptions, core: ModuleType, key_prefix: bytes) -> None:
        self.options = options
        self.buffer: Any = core.CommandBuffer(key_prefix)
        self.parser: Any = core.RespParser()
        self.sock: socket.socket | None = None
        self.generation = 0
        self.last_used = time.monotonic()
        self._read_buf = bytearray(_READ_SIZE)
        self._read_view = memoryview(self._read_buf)
        self.broken = False
        self.tls = False
        self.handshake: tuple[int, float, float] | None = None
        self.dialing = False
        """A TCP connect started and not yet finished (``connect(finish=False)``)."""
        self.kernel_timeout = 0.0
        self.set_ifeq = False
        """Whether the server offers ``SET ... IFEQ`` (the handshake's HELLO says)."""
        self.written = 0
        """Bytes of the last write that went out: after a write that failed part-way, its
        commands written may run."""

    def connect(self, deadline: float, finish: bool = True) -> None:
        """Open the socket, TLS included, then AUTH, SELECT and PING, all before ``deadline``
        and within the connect timeout. With ``finish=False`` nothing is waited for where that
        can be helped: a TCP connect to a single address is only started (``dialing``; see
        ``finish_dial``), any other connect's handshake only sent; the caller reads it with
        ``finish_connect`` (several servers' connects and handshakes in parallel)."""
        opts = self.options
        limit = min(opts.connect_timeout, deadline - time.monotonic())
        if limit <= 0:
            raise UnsentTimeoutError(f"the call's deadline passed before a connection to {opts.address} "
                                     "was opened")  # as asyncio's pool: nothing was sent
        connect_deadline = time.monotonic() + limit
        if not finish:
            dialed = self._dial(limit)
            if dialed is not None:
                self.sock = dialed
                self.dialing = True
                self.handshake = (0, connect_deadline, limit)
                return
        self._start(self._open(limit), connect_deadline, limit)
        if finish:
            self.finish_connect(connect_deadline)

    def _open(self, limit: float) -> socket.socket:
        """A connected socket (TLS handshake done), within ``limit`` seconds."""
        opts = self.options
        try:
            if opts.unix_socket_path is not None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(limit)
                try:
                    sock.connect(opts.unix_socket_path)
                except BaseException:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection((opts.host, opts.port), timeout=limit)
            if opts.ssl:
                try:
                    sock = opts.ssl_context().wrap_socket(sock, server_hostname=opts.host)
                except BaseException:
                    sock.close()
                    raise
        except TimeoutError:
            raise
        except builtins.TimeoutError as exc:
            raise self._connect_timeout(limit) from exc
        except ssl.SSLError as exc:
            raise ConnectionError(f"TLS handshake with {opts.address} failed: {exc.reason or exc}") from None
        except OSError as exc:
            raise self._cannot_connect(exc.strerror or str(exc)) from None
        return sock

    def _dial(self, limit: float) -> socket.socket | None:
        """A plain TCP connect to the server's one address, started and not waited for; None
        where it cannot be (a Unix socket, TLS, a name with several addresses: ``_open`` tries
        them in turn)."""
        opts = self.options
        if opts.unix_socket_path is not None or opts.ssl:
            return None
        try:
            found = socket.getaddrinfo(opts.host, opts.port, 0, socket.SOCK_STREAM)
        except OSError as exc:  # as ``_open`` would say, without a second lookup
            raise self._cannot_connect(exc.strerror or str(exc)) from None
        if len(found) != 1:
            return None
        family, kind, proto, _, address = found[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.connect(address)
        except BlockingIOError:  # on its way
            pass
        except OSError as exc:
            sock.close()
            raise self._cannot_connect(exc.strerror or str(exc)) from None
        except BaseException:
            sock.close()
            raise
        return sock

    def finish_dial(self, deadline: float) -> None:
        """The TCP connect ``connect(finish=False)`` started: waited for by ``deadline`` (none
        left: only checked), then the handshake sent (read by ``finish_connect``)."""
        if not self.dialing:
            return
        self.dialing = False
        sock = self.sock
        assert sock is not None and self.handshake is not None
        _, connect_deadline, limit = self.handshake
        try:
            if not readable((), max(0.0, min(deadline, connect_deadline) - time.monotonic()), (sock,)):
                raise self._connect_timeout(limit)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                raise self._cannot_connect(os.strerror(error))
            sock.setblocking(True)
        except BaseException:
            self.close()
            raise
        self._start(sock, connect_deadline, limit)

    def _start(self, sock: socket.socket, connect_deadline: float, limit: float) -> None:
        """A connected socket made this connection's, its handshake sent."""
        opts = self.options
        if not opts.unix_socket_path:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self.sock = sock
        self.tls = opts.ssl
        if not self.tls:
            sock.settimeout(None)
            self._set_kernel_timeout(sock, opts.timeout)
        try:
            count = append_handshake(self.buffer, opts)
            self.send(self.buffer.take(), connect_deadline)
        except NotSent:  # the connect itself took the whole connect timeout
            self.close()
            raise handshake_timeout(opts, limit) from None
        except BaseException:
            self.close()
            raise
        self.handshake = (count, connect_deadline, limit)

    def _connect_timeout(self, limit: float) -> TimeoutError:
        return TimeoutError(f"connecting to {self.options.address} timed out after {limit:.3g}s")

    def _cannot_connect(self, reason: str) -> ConnectionError:
        return ConnectionError(f"cannot connect to {self.options.address}: {reason}")

    def finish_connect(self, deadline: float) -> None:
        """Read the handshake's replies (AUTH, SELECT, PING: proof that a Redis answers) by
        ``deadline`` (``connect`` passes its own: the connect timeout's end)."""
        self.finish_dial(deadline)
        pending = self.handshake
        if pending is None:
            return
        self.handshake = None
        count, _, limit = pending
        opts = self.options
        try:
            # The first reply alone first: a server at maxclients answers one error and hangs
            # up, and the reason would be lost with the connection while reading the others.
            replies = self.read(1, deadline)
            refusal = refused(opts.address, replies[0])
            if refusal is not None:
                raise refusal
            if count > 1:
                replies += self.read(count - 1, deadline)
            self.set_ifeq = check_handshake(opts, replies)
        except ProtocolError as exc:
            self.close()
            raise not_redis(opts, f"its reply is not RESP: {exc}") from None
        except TimeoutError:
            self.close()
            raise handshake_timeout(opts, limit) from None
        except BaseException:
            self.close()
            raise

    def is_stale(self) -> bool:
        """True when an idle connection has something to read: the server closed it or sent junk."""
        sock = self.sock
        if sock is None:
            return True
        try:
            return bool(readable((sock,), 0))
        except (OSError, ValueError):
            return True

    def roundtrip(self, data: bytes, count: int, deadline: float) -> list[object]:
        """Write ``data`` and return the next ``count`` replies; on any failure the connection is
        broken, except ``NotSent``: ``deadline`` had passed before anything was written."""
        self._send_first(data, deadline)
        return self.read(count, deadline)

    def request(self, data: bytes, deadline: float) -> object:
        """Write one command and return its reply: ``roundtrip`` for one, with less overhead
        (``NotSent`` as there)."""
        sock = self._send_first(data, deadline)
        try:
            parser = self.parser
            view = self._read_view
            while True:
                n = sock.recv_into(view)
                if not n:
                    raise EOFError
                parser.feed(view[:n])
                replies = parser.get_replies(1)
                if replies:
                    return replies[0]
                self._arm(sock, deadline)
        except BaseException as exc:
            raise self._break(exc) from None

    def _send_first(self, data: bytes, deadline: float) -> socket.socket:
        """A call's write: ``NotSent`` when its deadline had passed before it (the connection is
        untouched and stays usable); any failure after that breaks the connection, and
        ``written`` says how much went out."""
        sock = self.sock
        if sock is None:
            raise ConnectionError(f"connection to {self.options.address} is closed")
        try:
            self._arm(sock, deadline)
        except builtins.TimeoutError:
            raise NotSent(UnsentTimeoutError(f"the call's deadline passed before anything was sent to "
                                             f"{self.options.address}")) from None
        except BaseException as exc:
            raise self._break(exc) from None
        try:
            sent = self.written = sock.send(data)  # all of it, but for a server that stopped reading
            if sent != len(data):
                self._write_rest(sock, data, sent, deadline)
        except BaseException as exc:
            raise self._break(exc) from None
        return sock

    def send(self, data: bytes, deadline: float) -> None:
        """Write ``data`` by ``deadline`` (a pipeline's chunk), as ``_send_first`` does."""
        self.written = 0
        self._send_first(data, deadline)

    def _write_rest(self, sock: socket.socket, data: bytes, sent: int, deadline: float) -> None:
        """The rest of ``data`` after a send() that wrote ``sent`` bytes, by ``deadline``: a
        kernel timeout covers one send(), and sendall() gave each one that made some progress
        the whole timeout again (three timeouts for a chunk bigger than the socket buffers on a
        server that stopped reading). ``written`` follows."""
        view = memoryview(data)
        while sent < len(data):
            self._arm(sock, deadline)
            sent += sock.send(view[sent:])
            self.written = sent

    def read(self, count: int, deadline: float) -> list[object]:
        """The next ``count`` replies, waiting no later than ``deadline``."""
        sock = self.sock
        if sock is None:
            raise ConnectionError(f"connection to {self.options.address} is closed")
        parser = self.parser
        try:
            replies = parser.get_replies(count) if parser.buffered() else []
            view = self._read_view
            while len(replies) < count:
                self._arm(sock, deadline)
                n = sock.recv_into(view)
                if not n:
                    raise EOFError
                parser.feed(view[:n])
                replies.extend(parser.get_replies(count - len(replies)))
            return replies
        except BaseException as exc:
            raise self._break(exc) from None

    def _arm(self, sock: socket.socket, deadline: float) -> None:
        """Make the next blocking socket call give up at ``deadline``.

        Plain sockets stay in blocking mode with a kernel timeout (SO_RCVTIMEO/SO_SNDTIMEO) of
        one call deadline, set once: Python's own socket timeout costs a poll() before every
        send and receive, about a fifth of a single acquire+release. The kernel timeout is only
        changed when less than a whole deadline is left (a reply arriving in pieces, a chunk
        late in a bulk call) and restored by the next call that has more. TLS
        sockets use Python's timeout, which knows about the TLS layer's buffering.
        """
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise builtins.TimeoutError
        if self.tls:
            sock.settimeout(remaining)
            return
        kernel = self.kernel_timeout
        if remaining < kernel - _TIMEOUT_SLACK:
            self._set_kernel_timeout(sock, remaining)
        elif kernel < self.options.timeout and kernel < remaining - _TIMEOUT_SLACK:
            # Shortened for the end of an earlier call: a new call gets its whole deadline back.
            self._set_kernel_timeout(sock, min(remaining, self.options.timeout))

    def _set_kernel_timeout(self, sock: socket.socket, seconds: float) -> None:
        if self.tls:
            return
        whole = int(seconds)
        value = struct.pack("ll", whole, max(1, int((seconds - whole) * 1_000_000)) if not whole else
                            int((seconds - whole) * 1_000_000))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
        self.kernel_timeout = seconds

    def _break(self, exc: BaseException) -> BaseException:
        self.broken = True
        self.close()
        return self._translate(exc)

    def _translate(self, exc: BaseException) -> BaseException:
        address = self.options.address
        if isinstance(exc, TimeoutError | ProtocolError | ConnectionError):
            return exc
        if isinstance(exc, builtins.TimeoutError | BlockingIOError):
            return TimeoutError(f"{address} did not answer within the call's deadline")
        if isinstance(exc, EOFError):
            return ConnectionError(f"{address} closed the connection")
        if isinstance(exc, OSError):
            return ConnectionError(f"connection to {address} failed: {exc.strerror or exc}")
        return exc

    def close(self) -> None:
        self.dialing = False
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

