"""The pure-Python core: RESP2 encoding and parsing for lock commands, with no I/O.

This is the twin of the compiled ``turbolock._core_c``: same names, same signatures, same
results and same errors. The client only ever talks to a core through these two classes,
so either implementation can sit under it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._wheel_py import TimerWheel
from .errors import ProtocolError, ReplyError

__all__ = ["IMPLEMENTATION", "MAX_NESTING", "CommandBuffer", "RespParser", "TimerWheel"]

IMPLEMENTATION = "py"

# hiredis 0.14 refuses arrays nested deeper than this; both cores do the same.
MAX_NESTING = 7

_CRLF = b"\r\n"


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def _arg(value: bytes | str | int) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int) and not isinstance(value, bool):
        return b"%d" % value
    raise TypeError(f"command argument must be bytes, str or int, not {type(value).__name__}")


class CommandBuffer:
    """Appends RESP2 commands into one growing buffer; ``take()`` hands it over for one write.

    Lock commands take a lock *name*; the buffer writes ``key_prefix + name`` as the key.
    """

    __slots__ = ("_buf", "_prefix", "_count")

    def __init__(self, key_prefix: bytes = b"") -> None:
        if not isinstance(key_prefix, bytes):
            raise TypeError("key_prefix must be bytes")
        self._buf = bytearray()
        self._prefix = key_prefix
        self._count = 0

    @property
    def key_prefix(self) -> bytes:
        return self._prefix

    @property
    def pending(self) -> int:
        """Commands appended since the last ``take()``."""
        return self._count

    def __len__(self) -> int:
        return len(self._buf)

    def take(self) -> bytes:
        """Return everything appended so far and start empty."""
        data = bytes(self._buf)
        self._buf.clear()
        self._count = 0
        return data

    def clear(self) -> None:
        self._buf.clear()
        self._count = 0

    def append_command(self, args: Sequence[bytes | str | int]) -> None:
        """Any command, arguments as given (no key prefix is added)."""
        encoded = [_arg(a) for a in args]
        if not encoded:
            raise ValueError("a command needs at least one argument")
        parts = [b"*%d\r\n" % len(encoded)]
        parts.extend(_bulk(a) for a in encoded)
        self._buf += b"".join(parts)
        self._count += 1

    def append_set_nx_px(self, name: bytes, token: bytes, ttl_ms: int) -> None:
        """``SET key token NX PX ttl_ms``."""
        _check_bytes(name, token)
        self._buf += b"*6\r\n$3\r\nSET\r\n$%d\r\n%b%b\r\n$%d\r\n%b\r\n$2\r\nNX\r\n$2\r\nPX\r\n%b" % (
            len(self._prefix) + len(name), self._prefix, name, len(token), token, _bulk(b"%d" % ttl_ms))
        self._count += 1

    def append_set_nx_px_many(self, names: Sequence[bytes], tokens: Sequence[bytes], ttl_ms: int) -> None:
        """One ``SET key token NX PX ttl_ms`` per name, names and tokens paired by position."""
        if len(names) != len(tokens):
            raise ValueError("names and tokens differ in length")
        tail = b"\r\n$2\r\nNX\r\n$2\r\nPX\r\n" + _bulk(b"%d" % ttl_ms)
        prefix = self._prefix
        plen = len(prefix)
        parts = []
        for name, token in zip(names, tokens, strict=True):
            _check_bytes(name, token)
            parts.append(b"*6\r\n$3\r\nSET\r\n$%d\r\n%b%b\r\n$%d\r\n%b%b" % (
                plen + len(name), prefix, name, len(token), token, tail))
        self._buf += b"".join(parts)
        self._count += len(parts)

    def append_evalsha(self, sha: bytes, name: bytes, token: bytes, ttl_ms: int | None = None) -> None:
        """``EVALSHA sha 1 key token [ttl_ms]``: the single-key release/extend/check scripts."""
        self.append_evalsha_many(sha, (name,), (token,), ttl_ms)

    def append_evalsha_many(self, sha: bytes, names: Sequence[bytes], tokens: Sequence[bytes],
                            ttl_ms: int | None = None) -> None:
        """One ``EVALSHA sha 1 key token [ttl_ms]`` per name."""
        if len(names) != len(tokens):
            raise ValueError("names and tokens differ in length")
        _check_bytes(sha)
        count = b"*6\r\n" if ttl_ms is not None else b"*5\r\n"
        head = count + b"$7\r\nEVALSHA\r\n" + _bulk(sha) + b"$1\r\n1\r\n"
        tail = _bulk(b"%d" % ttl_ms) if ttl_ms is not None else b""
        prefix = self._prefix
        plen = len(prefix)
        parts = []
        for name, token in zip(names, tokens, strict=True):
            _check_bytes(name, token)
            parts.append(b"%b$%d\r\n%b%b\r\n$%d\r\n%b\r\n%b" % (
                head, plen + len(name), prefix, name, len(token), token, tail))
        self._buf += b"".join(parts)
        self._count += len(parts)

    def append_evalsha_multikey(self, sha: bytes, names: Sequence[bytes], tokens: Sequence[bytes],
                                ttl_ms: int | None = None) -> None:
        """One ``EVALSHA sha n key1..keyn [ttl_ms] token1..tokenn`` covering every name."""
        if len(names) != len(tokens):
            raise ValueError("names and tokens differ in length")
        _check_bytes(sha)
        n = len(names)
        nargs = 3 + 2 * n + (1 if ttl_ms is not None else 0)
        prefix = self._prefix
        plen = len(prefix)
        parts = [b"*%d\r\n$7\r\nEVALSHA\r\n%b%b" % (nargs, _bulk(sha), _bulk(b"%d" % n))]
        for name in names:
            _check_bytes(name)
            parts.append(b"$%d\r\n%b%b\r\n" % (plen + len(name), prefix, name))
        if ttl_ms is not None:
            parts.append(_bulk(b"%d" % ttl_ms))
        for token in tokens:
            _check_bytes(token)
            parts.append(_bulk(token))
        self._buf += b"".join(parts)
        self._count += 1

    def append_pttl(self, name: bytes) -> None:
        """``PTTL key``."""
        self.append_pttl_many((name,))

    def append_pttl_many(self, names: Sequence[bytes]) -> None:
        """One ``PTTL key`` per name."""
        prefix = self._prefix
        plen = len(prefix)
        parts = []
        for name in names:
            _check_bytes(name)
            parts.append(b"*2\r\n$4\r\nPTTL\r\n$%d\r\n%b%b\r\n" % (plen + len(name), prefix, name))
        self._buf += b"".join(parts)
        self._count += len(parts)


def _check_bytes(*values: object) -> None:
    for value in values:
        if type(value) is not bytes:
            raise TypeError(f"expected bytes, not {type(value).__name__}")


class RespParser:
    """Parses RESP2 replies fed to it in pieces of any size.

    ``get_replies()`` returns every complete reply so far, in order: bytes for simple and
    bulk strings, int, None for nil, list for arrays and ``ReplyError`` for error replies
    (returned, not raised). Bytes that are not RESP2 raise ``ProtocolError``; the parser
    then refuses all further use, so a half-parsed connection can never be reused.
    """

    __slots__ = ("_buf", "_pos", "_broken")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._broken: str | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._broken is not None:
            raise ProtocolError(self._broken)
        self._buf += data

    def buffered(self) -> int:
        """Bytes fed but not yet consumed by a complete reply."""
        return len(self._buf) - self._pos

    def get_replies(self, limit: int = -1) -> list[object]:
        """Pop up to ``limit`` complete replies (all of them when ``limit`` < 0)."""
        if self._broken is not None:
            raise ProtocolError(self._broken)
        out: list[object] = []
        buf = self._buf
        pos = self._pos
        try:
            while limit < 0 or len(out) < limit:
                reply, end = self._parse(buf, pos, 0)
                if end < 0:
                    break
                out.append(reply)
                pos = end
        except ProtocolError as exc:
            self._broken = str(exc)
            self._buf = bytearray()
            self._pos = 0
            raise
        if pos == len(buf):
            buf.clear()
            pos = 0
        elif pos > 65536 and pos * 2 > len(buf):
            del buf[:pos]
            pos = 0
        self._pos = pos
        return out

    def _parse(self, buf: bytearray, pos: int, depth: int) -> tuple[object, int]:
        """One reply starting at ``pos`` and the position after it; position -1 when incomplete.

        (Not an exception for "incomplete": a raised shared exception object kept a traceback
        chain of parser frames, and the replies they held, alive.)
        """
        end = buf.find(_CRLF, pos)
        if end < 0:
            if len(buf) > pos:
                _check_type_byte(buf[pos])
            return None, -1
        kind = buf[pos]
        if kind == 43:  # '+'
            return bytes(buf[pos + 1:end]), end + 2
        if kind == 36:  # '$'
            length = _parse_int(buf, pos + 1, end)
            if length < 0:
                if length != -1:
                    raise ProtocolError("Protocol error, negative bulk length")
                return None, end + 2
            start = end + 2
            stop = start + length
            if len(buf) < stop + 2:
                return None, -1
            return bytes(buf[start:stop]), stop + 2
        if kind == 58:  # ':'
            return _parse_int(buf, pos + 1, end), end + 2
        if kind == 45:  # '-'
            return ReplyError(buf[pos + 1:end].decode("utf-8", "replace")), end + 2
        if kind == 42:  # '*'
            count = _parse_int(buf, pos + 1, end)
            if count < 0:
                if count != -1:
                    raise ProtocolError("Protocol error, negative multibulk length")
                return None, end + 2
            if depth >= MAX_NESTING:
                raise ProtocolError(f"No support for nested multi bulk replies with depth > {MAX_NESTING}")
            items: list[object] = []
            pos = end + 2
            for _ in range(count):
                item, pos = self._parse(buf, pos, depth + 1)
                if pos < 0:
                    return None, -1
                items.append(item)
            return items, pos
        _check_type_byte(kind)
        raise AssertionError("unreachable")  # pragma: no cover


def _check_type_byte(kind: int) -> None:
    if kind not in b"+-:$*":
        raise ProtocolError(f"Protocol error, got {chr(kind)!r} as reply type byte")


def _parse_int(buf: bytearray, start: int, end: int) -> int:
    text = bytes(buf[start:end])
    if not text or not (text.isdigit() or (text[:1] == b"-" and text[1:].isdigit())):
        raise ProtocolError("Protocol error, bad integer value")
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ProtocolError("Protocol error, integer out of range")
    return value
