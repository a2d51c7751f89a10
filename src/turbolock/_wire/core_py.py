"""The pure-Python core: RESP2 encoding and parsing for lock commands, with no I/O.

This is the twin of the compiled ``turbolock._core_c``: same names, same signatures, same
results and same errors. The client only ever talks to a core through these two classes,
so either implementation can sit under it.
"""

from __future__ import annotations

import math
import types
import weakref
from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter, is_
from typing import Any

from turbolock._wire.slots import key_slot
from turbolock._wire.wheel_py import TimerWheel
from turbolock.errors import ProtocolError, ReplyError

__all__ = ["IMPLEMENTATION", "MAX_NESTING", "CommandBuffer", "RespParser", "TimerWheel"]

IMPLEMENTATION = "py"

# Arrays nest at most this many levels: hiredis 0.14's reader has a stack of 9 tasks and refuses
# an array header read at the 9th ("depth > 7", counting the top level as 0). Both cores refuse
# exactly there, with hiredis's message.
MAX_NESTING = 8


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

    It accepts and refuses exactly what hiredis 0.14.1's reader (the compiled core) does,
    with the same messages, at the same point of the stream.
    """

    __slots__ = ("_buf", "_need", "_broken")

    def __init__(self) -> None:
        self._buf = bytearray()  # every byte fed and not yet consumed by a complete reply
        # Parsing cannot get further until the buffer holds this many bytes (a bulk string's
        # body, or one more byte of a line), so an unfinished reply is not parsed again and again.
        self._need = 0
        self._broken: str | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._broken is not None:
            raise ProtocolError(self._broken)
        self._buf += data

    def buffered(self) -> int:
        """Bytes fed but not yet consumed by a complete reply."""
        return len(self._buf)

    def get_replies(self, limit: int = -1) -> list[object]:
        """Pop up to ``limit`` complete replies (all of them when ``limit`` < 0)."""
        if self._broken is not None:
            raise ProtocolError(self._broken)
        buf = self._buf
        if len(buf) < self._need or not limit:
            return []
        # One copy per call: slices of bytes are bytes, and bytes can be looked up in _INTS.
        data = bytes(buf)
        size = len(data)
        find = data.find
        out: list[object] = []
        append = out.append
        pos = 0
        need = 0
        try:
            # Simple replies at the top level are parsed inline (this is the fallback's hot
            # path); arrays, errors and refusals go through _parse.
            while pos < size and len(out) != limit:
                end = find(b"\r\n", pos)
                kind = data[pos]
                if end < 0:
                    _check_incomplete(kind, 0)
                    need = size + 1
                    break
                if kind == 43:  # '+'
                    append(data[pos + 1:end])
                    pos = end + 2
                    continue
                if kind == 58:  # ':'
                    value = _INTS.get(data[pos + 1:end])
                    if value is not None:
                        append(value)
                        pos = end + 2
                        continue
                elif kind == 36:  # '$'
                    length = _INTS.get(data[pos + 1:end])
                    if length is not None and length >= 0:
                        stop = end + 2 + length
                        if stop + 2 > size:
                            need = stop + 2
                            break
                        append(data[end + 2:stop])
                        pos = stop + 2
                        continue
                    if length == -1:
                        append(None)
                        pos = end + 2
                        continue
                reply, end = _parse(data, pos, 0)
                if end < 0:
                    need = -end
                    break
                append(reply)
                pos = end
        except ProtocolError as exc:
            self._broken = str(exc)
            self._buf = bytearray()
            self._need = 0
            raise
        if pos == size:
            buf.clear()
        elif pos:
            del buf[:pos]  # cheap: a bytearray drops its head by moving its start
        self._need = need - pos if need else 0
        return out


# Canonical spellings of the numbers replies use most: a dict hit skips the strict parse.
_INTS = {b"%d" % i: i for i in range(-2, 513)}
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_TOO_DEEP = f"No support for nested multi bulk replies with depth > {MAX_NESTING - 1}"
# hiredis's chrtos(): how its error message spells a bad type byte.
_BYTE_SPELLINGS = {ord("\\"): '"\\\\"', ord('"'): '"\\""', ord("\n"): '"\\n"', ord("\r"): '"\\r"',
                   ord("\t"): '"\\t"', ord("\a"): '"\\a"', ord("\b"): '"\\b"'}


def _parse(data: bytes, pos: int, depth: int) -> tuple[object, int]:
    """One reply starting at ``pos`` (nested ``depth`` arrays deep) and the position after it.

    An incomplete reply gives ``-need`` as the position, ``need`` being how long ``data`` must
    be before parsing can get further. (Not an exception for "incomplete": a raised shared
    exception object kept a traceback chain of parser frames, and the replies they held, alive.)
    """
    end = data.find(b"\r\n", pos)
    kind = data[pos]
    if end < 0:
        _check_incomplete(kind, depth)
        return None, -(len(data) + 1)
    if kind == 43:  # '+'
        return data[pos + 1:end], end + 2
    if kind == 58:  # ':'
        return _number(data[pos + 1:end], "Bad integer value"), end + 2
    if kind == 36:  # '$'
        length = _number(data[pos + 1:end], "Bad bulk string length")
        if length < 0:
            if length != -1:
                raise ProtocolError("Bulk string length out of range")
            return None, end + 2
        stop = end + 2 + length
        if stop + 2 > len(data):
            return None, -(stop + 2)
        return data[end + 2:stop], stop + 2
    if kind == 45:  # '-'
        return ReplyError(data[pos + 1:end].decode("utf-8", "replace")), end + 2
    if kind == 42:  # '*'
        if depth >= MAX_NESTING:
            raise ProtocolError(_TOO_DEEP)
        count = _number(data[pos + 1:end], "Bad multi-bulk length")
        if count < -1 or count > _INT32_MAX:
            raise ProtocolError("Multi-bulk length out of range")
        if count < 0:
            return None, end + 2
        items: list[object] = []
        pos = end + 2
        for _ in range(count):
            if pos == len(data):
                return None, -(pos + 1)
            item, pos = _parse(data, pos, depth + 1)
            if pos < 0:
                return None, pos
            items.append(item)
        return items, pos
    raise _bad_type_byte(kind)


def _check_incomplete(kind: int, depth: int) -> None:
    """What hiredis refuses from a reply's first byte alone, before its line is complete."""
    if kind == 42:
        if depth >= MAX_NESTING:
            raise ProtocolError(_TOO_DEEP)
    elif kind not in b"+-:$":
        raise _bad_type_byte(kind)


def _bad_type_byte(kind: int) -> ProtocolError:
    spelling = _BYTE_SPELLINGS.get(kind)
    if spelling is None:
        spelling = f'"{chr(kind)}"' if 32 <= kind < 127 else f'"\\x{kind:02x}"'
    return ProtocolError(f"Protocol error, got {spelling} as reply type byte")


def _number(text: bytes, refusal: str) -> int:
    """hiredis's string2ll: a canonical decimal int64 (no sign but '-', no leading zero, no -0)."""
    value = _INTS.get(text)
    if value is not None:
        return value
    try:
        value = int(text)
    except ValueError:
        raise ProtocolError(refusal) from None
    if b"%d" % value != text or not _INT64_MIN <= value <= _INT64_MAX:
        raise ProtocolError(refusal)
    return value


def key_slots(prefix: bytes, keys: list[bytes]) -> list[int]:
    """The cluster slot of ``prefix + key`` for each key (bytes), in order."""
    # Exact types, as the compiled core's signature takes: a bytearray key hashed here but not there.
    if type(prefix) is not bytes or type(keys) is not list or not set(map(type, keys)) <= {bytes}:
        raise TypeError("key_slots takes bytes and a list of bytes")
    return [key_slot(prefix + key) for key in keys]


def group_items(numbers: list[int], indices: list[int], slots: list[int], groups: int) -> list[list[int]]:
    """``groups`` lists: ``indices[j]`` goes to list ``numbers[slots[j]]``, each list in input
    order. Every number must be below ``groups``."""
    _check_lists(numbers, indices, slots)
    if len(slots) != len(indices):
        raise ValueError("group_items: indices and slots differ in length")
    _check_range(slots, len(numbers), "group_items: a slot past the numbers")
    used = list(map(numbers.__getitem__, slots))  # in C; the loop below then only appends
    if used and (min(used) < 0 or max(used) >= groups):
        raise ValueError("group_items: a number past the groups")
    out: list[list[int]] = [[] for _ in range(groups)]
    appends = [items.append for items in out]
    for i, number in zip(indices, used, strict=True):
        appends[number](i)
    return out


def take_items(source: list[object], indices: list[int]) -> list[object]:
    """``[source[i] for i in indices]``."""
    _check_lists(source, indices)
    _check_range(indices, len(source), "take_items: an index past the list")
    return [source[i] for i in indices]


def put_items(target: list[object], indices: list[int], values: list[object]) -> None:
    """``target[indices[j]] = values[j]`` for every j; every index is checked before any is written."""
    _check_lists(target, indices, values)
    if len(values) != len(indices):
        raise ValueError("put_items: indices and values differ in length")
    _check_range(indices, len(target), "put_items: an index past the list")
    for i, value in zip(indices, values, strict=True):
        target[i] = value


def _check_range(indices: list[int], size: int, refusal: str) -> None:
    # min and max run in C: a check in the loop would double the pure core's work per item.
    if indices and (min(indices) < 0 or max(indices) >= size):
        raise IndexError(refusal)


def _check_lists(*values: object) -> None:
    # Exact lists, as the compiled core's signatures take.
    if any(type(value) is not list for value in values):
        raise TypeError("takes lists")


def track(item: object) -> None:
    """The compiled core lets the cycle collector track ``item`` again; nothing to do here (the
    pure core never untracks)."""


def untrack(objects: list[object], start: int, stop: int) -> None:
    """The compiled core stops the cycle collector tracking ``objects[start:stop]`` (see its
    ``leases.pyx``); the pure core has no portable way to and leaves them tracked. Both check
    the range alike."""
    if type(objects) is not list:
        raise TypeError("untrack takes a list")
    if start < 0 or stop > len(objects) or start > stop:
        raise IndexError("untrack range out of the list")


def set_slot(objects: list[object], descriptor: Any, value: object) -> None:
    """Write ``value`` into the slot ``descriptor`` (a class's member descriptor, such as
    ``Lease._expires``) of every object; every object's type is checked before any is written."""
    if type(objects) is not list:
        raise TypeError("set_slot takes a list")
    if type(descriptor) is not types.MemberDescriptorType:
        raise TypeError("set_slot takes a slot's member descriptor")
    owner = descriptor.__objclass__
    for item in objects:
        if not isinstance(item, owner):
            raise TypeError(f"set_slot: {type(item).__name__} has no slot of {owner.__name__}")
    setter = descriptor.__set__
    for item in objects:
        setter(item, value)


def slots_of(cls: type) -> set[str]:
    """Every slot of ``cls`` and its bases that holds a value (not ``__weakref__``/``__dict__``)."""
    found: set[str] = set()
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        found.update((slots,) if isinstance(slots, str) else slots)
    found.difference_update(("__weakref__", "__dict__"))
    return found


_name_of = attrgetter("_name")
_token_of = attrgetter("token")
_owner_of = attrgetter("owner")


class LeaseMaker:
    """Makes instances of ``cls`` whose slots ``values`` come from the arguments of ``make`` and
    whose slots ``empty`` are None, for a class whose ``__init__`` does exactly that with
    ``values`` as its arguments, in that order. The compiled core writes the slots; this one
    calls ``cls``."""

    def __init__(self, cls: type, values: tuple[str, ...], empty: tuple[str, ...]) -> None:
        named = values + empty
        if slots_of(cls) != set(named) or len(set(named)) != len(named):
            raise TypeError(f"{cls.__name__}'s slots are {sorted(slots_of(cls))}, not {sorted(named)}")
        if cls.__dictoffset__ != 0:
            raise TypeError(f"{cls.__name__} must be a class with __slots__ only")
        self._cls = cls
        self._values = len(values)

    def make(self, out: list[object], start: int, columns: tuple[list[object], ...], first: int, count: int,
             shared: tuple[object, ...], untracked: bool = False) -> None:
        """``out[start + i]`` = an instance whose values are each column's item ``first + i``,
        then ``shared``, for i in 0..count-1 (``untracked`` is the compiled core's: Python code
        cannot untrack an object)."""
        if len(columns) + len(shared) != self._values:
            raise ValueError(f"{len(columns)} columns and {len(shared)} shared values for "
                             f"{self._values} slots")
        if count < 0 or start < 0 or first < 0 or start > len(out) or count > len(out) - start:
            raise IndexError("make range out of the list")
        if any(type(column) is not list or first > len(column) or count > len(column) - first
               for column in columns):
            raise IndexError("a column is not a list that long")
        out[start:start + count] = map(self._cls, *(column[first:first + count] for column in columns),
                                       *(repeat(value, count) for value in shared))

    def columns(self, leases: Sequence[object], owner: object,
                max_bytes: int) -> tuple[list[bytes], list[bytes]] | None:
        """(keys, tokens) of ``leases`` in one pass, when each is exactly an instance of this
        maker's class whose ``owner`` slot is ``owner`` and whose name ``names_as_keys`` takes;
        None sends the caller to its checks one by one."""
        if not {"_name", "token", "owner"} <= slots_of(self._cls):
            raise TypeError(f"{self._cls.__name__} has no _name, token and owner slots")
        if not set(map(type, leases)) <= {self._cls}:
            return None
        try:
            if not all(map(is_, map(_owner_of, leases), repeat(owner))):  # by identity, as the C core
                return None
            keys = names_as_keys(list(map(_name_of, leases)), max_bytes)
            return None if keys is None else (keys, list(map(_token_of, leases)))
        except AttributeError:  # a slot never set (an instance made without __init__)
            return None


def names_as_keys(names: Sequence[object], max_bytes: int) -> list[bytes] | None:
    """Each name as its key (a str UTF-8 encoded, bytes as they are), or None when the caller
    must check the names one by one: one is not exactly a str or bytes, is empty, is longer than
    ``max_bytes`` encoded, or cannot be encoded, or str and bytes are mixed. A list of keys means
    every name is fine, and all are str or all bytes: distinct names are then distinct keys."""
    if type(names) is not list:  # read once below, as the compiled core does (an iterator too)
        names = list(names)
    types = set(map(type, names))
    if not types:
        return []
    if types == {str}:
        try:
            keys = list(map(str.encode, names))
        except UnicodeEncodeError:
            return None
    elif types == {bytes}:
        keys = list(names)  # type: ignore[arg-type]
    else:
        return None
    if 0 < min(map(len, keys)) and max(map(len, keys)) <= max_bytes:
        return keys
    return None


def _own_slot(cls: type, name: str) -> None:
    """Refuse unless ``name`` is a slot of ``cls``'s own layout (not another class's descriptor
    set as a class attribute, which the compiled core would read outside the object)."""
    descriptor = getattr(cls, name, None)
    if type(descriptor) is not types.MemberDescriptorType or not issubclass(cls, descriptor.__objclass__):
        raise TypeError(f"{cls.__name__}.{name} is not a slot of its own")


class DueReader:
    """Splits the renewal states a wake-up found due (instances of ``state_cls``, weak
    references to their leases with slots ``released``, ``limit_reached`` and ``terms``, an
    instance of ``terms_cls`` with a slot ``limited``): ``split`` sends the leases of the plain
    ones, and leaves the others to the caller's general loop. The compiled core reads the slots
    in C; this one by attribute, with the same outcome."""

    def __init__(self, state_cls: type, terms_cls: type, lease_types: tuple[type, ...]) -> None:
        """``lease_types``: classes whose instances' expiry is their slots' arithmetic, as
        ``Lease.expires_at`` has it (``_expires``, else ``acquired_at + ttl_ms / 1000``, lowered
        by the one command in ``_flight``)."""
        for cls, names in ((state_cls, ("released", "limit_reached", "terms")), (terms_cls, ("limited",))):
            for name in names:
                _own_slot(cls, name)
        if not lease_types:
            raise TypeError("DueReader needs at least one lease type")
        base = lease_types[0]
        lease_slots = ("_flight", "_expires", "acquired_at", "ttl_ms")
        for cls in lease_types:
            if type(cls) is not type or not issubclass(cls, base) or any(
                    getattr(cls, name, None) is not getattr(base, name, None) for name in lease_slots):
                raise TypeError("the lease types must be classes of one slot layout")
        for name in lease_slots:
            _own_slot(base, name)
        if not issubclass(state_cls, weakref.ref):
            raise TypeError(f"{state_cls.__name__} is not a weak reference")
        self._state_cls: Any = state_cls
        self._terms_cls: Any = terms_cls
        self._lease_types = lease_types
        self._lease_ids = frozenset(map(id, lease_types))
        """Matched by identity (``in`` would compare with ``==``, which a metaclass may define)."""

    def split(self, states: list[Any], now: float, margin: float) -> tuple[list[Any], float, list[Any]]:
        """(leases to send, the earliest of their expiries, states left to the caller) for
        ``states`` due at ``now``: a plain state's lease is sent when its expiry less ``margin``
        is after ``now``; a state whose lease is gone or that was released is dropped; any other
        (a slot of another type, or never set) is left over, in order."""
        if type(states) is not list:
            raise TypeError(f"states must be a list, not {type(states).__name__}")
        send: list[Any] = []
        rest: list[Any] = []
        keep, leave = send.append, rest.append
        earliest = math.inf
        state_cls, terms_cls, lease_ids = self._state_cls, self._terms_cls, self._lease_ids
        for state in states:
            if type(state) is not state_cls:
                leave(state)
                continue
            lease = state()
            try:
                released = state.released
                if lease is None or released is True:
                    continue
                terms = state.terms
                if (released is not False or state.limit_reached is not False or type(terms) is not terms_cls
                        or terms.limited is not False or id(type(lease)) not in lease_ids):
                    leave(state)
                    continue
                flight = lease._flight  # before _expires, as Lease.expires_at reads them
                expiry = lease._expires
                if expiry is None:
                    acquired_at, ttl_ms = lease.acquired_at, lease.ttl_ms
                    if type(acquired_at) is not float or type(ttl_ms) is not int:
                        leave(state)
                        continue
                    expiry = acquired_at + ttl_ms / 1000.0
                elif type(expiry) is not float:
                    leave(state)
                    continue
            except AttributeError:  # a slot never set
                leave(state)
                continue
            if flight is not None:
                if type(flight) is not tuple or len(flight) != 2 or type(flight[1]) is not float:
                    leave(state)
                    continue
                if flight[1] < expiry:
                    expiry = flight[1]
            if expiry - margin <= now:  # too late to renew: the general loop says it is lost
                leave(state)
                continue
            keep(lease)
            if expiry < earliest:
                earliest = expiry
        return send, earliest, rest
