"""What the blocking and the asyncio bulk calls share: checks, encoders and reading the replies.

Sans-IO: nothing here sends or waits. Each client checks its input with these functions, sends
with its own executor, then turns the raw replies (ints, error replies, ``UNKNOWN`` or
``NOT_SENT``) into results with the ``settle_*`` functions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any, Protocol

from turbolock._flows.client_settings import check_fenced_keys
from turbolock._flows.renewal_book import extends_unconfirmed, renewal_of
from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import NOT_DURABLE, NOT_SENT, UNKNOWN, Encoder, Reencoder, failures
from turbolock._wire.replies import reply_error
from turbolock._wire.transactions import Transactions, append_transaction, fold_transactions
from turbolock._wire.validate import MAX_NAME_BYTES, TOKEN_BYTES, check_token, encode_names
from turbolock.errors import (
    ConnectionError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockError,
    OutcomeUnknownError,
    ReplyError,
)
from turbolock.lease import (
    LEASE_EMPTY,
    LEASE_VALUES,
    FencedLease,
    Lease,
    LockInfo,
    commands_ran,
    commands_refused,
    commands_sent,
    info_from_pttl,
    keys_of,
)

MAX_BULK = 1_000_000
"""Most names or leases one bulk call takes."""


class BulkClient(Protocol):
    """What the settle functions need of a client, blocking or asyncio."""

    _owner: Any
    core: Any

    def _check_lease(self, lease: object, argument: str = "lease") -> None: ...

    def _remember_cleanup(self, key: bytes, token: bytes, forget_at: float,
                          recheck: bool = False) -> None: ...

    def _renewer(self) -> Any: ...

    def _lease_lost(self, lease: Lease, reason: str) -> None: ...


def check_size(items: Sequence[Any], argument: str) -> None:
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidArgumentTypeError(argument, "must be a sequence (list or tuple)")
    if len(items) > MAX_BULK:
        raise InvalidArgumentError(argument, f"has {len(items)} items; one call takes at most {MAX_BULK}")


def encode_unique_names(names: Sequence[str | bytes], core: Any = None) -> list[bytes]:
    """The names as keys, all checked (and none twice) before anything is sent."""
    return names_checked(names, core)[0]


def names_checked(names: Sequence[str | bytes], core: Any = None) -> tuple[list[bytes], bool]:
    """``encode_unique_names`` in ``core``'s pass, and whether the names were all exactly str or
    all exactly bytes (``encode_names``)."""
    check_size(names, "names")
    keys, one_type = encode_names(names, "names", core)
    # Distinct names of one type are distinct keys; a caller's strings keep their hashes from
    # call to call (a claim's shard list), where the keys are new bytes to hash every time.
    distinct = names if one_type and type(names) in (list, tuple) else keys
    if len(set(distinct)) != len(keys):
        seen: set[bytes] = set()
        for name, key in zip(names, keys, strict=True):
            if key in seen:
                raise InvalidArgumentError("names", f"lists {name!r} more than once")
            seen.add(key)
    return keys, one_type


def check_leases(client: BulkClient, leases: Sequence[Lease]) -> tuple[list[bytes], list[bytes]]:
    """Every lease checked (and none twice) before anything is sent; their keys and tokens."""
    check_size(leases, "leases")
    kind = FencedLease if leases and type(leases[0]) is FencedLease else Lease  # a fenced acquire's leases
    columns = lease_maker(client.core, kind).columns(leases, client._owner, MAX_NAME_BYTES)
    if columns is None:
        check = client._check_lease  # the slow path names the first bad lease
        for lease in leases:
            check(lease, "leases")
        columns = keys_of(leases, client.core), list(map(_token_of, leases))
    keys, tokens = columns
    if len(set(keys)) != len(keys):
        raise InvalidArgumentError("leases", "lists one lock more than once")
    return keys, tokens


_owner_of = attrgetter("owner")
_token_of = attrgetter("token")


def check_tokens(tokens: Sequence[bytes], count: int) -> list[bytes]:
    check_size(tokens, "tokens")
    if len(tokens) != count:
        raise InvalidArgumentError("tokens", f"has {len(tokens)} items for {count} names")
    return [check_token(token, "tokens") for token in tokens]


def batch_tokens(count: int) -> list[bytes]:
    """The tokens of ``count`` locks sent together: one fresh random token for all of them.

    A token tells this holder's lock from anyone else's on the same key; the keys of one send
    are distinct, so one token serves them all, as Redisson's locks of one thread share its id
    (and a lease costs no token object of its own). Each send draws its own, as does a resend
    after a redirect or a failover: a release with the token of an earlier send whose reply was
    lost must never delete what a later one took. A resend after NOSCRIPT (nothing ran) keeps
    its tokens; so does Redlock's, the same bytes on every master.
    """
    return [os.urandom(TOKEN_BYTES)] * count


def script_encoders(script: _scripts.Script, keys: list[bytes], tokens: list[bytes],
                    ttl_ms: int | None) -> tuple[Encoder, Reencoder]:
    """Encoders of one single-key EVALSHA per lock: by chunk, and again by index after NOSCRIPT."""
    append_each = script.append_each

    def encode(buf: Any, start: int, stop: int) -> None:
        append_each(buf, keys[start:stop], tokens[start:stop], ttl_ms)

    def reencode(buf: Any, indices: Sequence[int]) -> None:
        append_each(buf, [keys[i] for i in indices], [tokens[i] for i in indices], ttl_ms)

    return encode, reencode


def call_sizes(count: int) -> list[int]:
    """How many keys each multi-key script call of a bulk call of ``count`` keys takes."""
    per_call = _scripts.KEYS_PER_CALL
    return [min(per_call, count - start) for start in range(0, count, per_call)]


def multikey_encoders(script: _scripts.Script, keys: list[bytes], tokens: list[bytes],
                      ttl_ms: int | None) -> tuple[Encoder, Reencoder]:
    """Encoders of one multi-key EVALSHA per ``KEYS_PER_CALL`` locks (the keys, then the ttl if
    any and each key's token): by range of calls, and by index after NOSCRIPT."""
    sha, per_call = script.sha, _scripts.KEYS_PER_CALL

    def reencode(buf: Any, calls: Sequence[int]) -> None:
        for call in calls:
            first = call * per_call
            buf.append_evalsha_multikey(sha, keys[first:first + per_call], tokens[first:first + per_call],
                                        ttl_ms)

    def encode(buf: Any, start: int, stop: int) -> None:
        reencode(buf, range(start, stop))

    return encode, reencode


def pttl_encoder(keys: list[bytes]) -> Encoder:
    def encode(buf: Any, start: int, stop: int) -> None:
        buf.append_pttl_many(keys[start:stop])

    return encode


def item_error(replies: Sequence[object], i: int, names: Sequence[str | bytes]) -> LockError:
    """The error of item ``i``'s reply; a whole multi-key call's error (``expand_calls`` repeats
    its one reply for each of the call's locks) names every lock of that call."""
    reply = replies[i]
    call = [names[j] for j, other in enumerate(replies) if other is reply]
    return reply_error(reply, names[i], call)


def settle_release(client: BulkClient, leases: Sequence[Lease], replies: list[object]) -> list[bool]:
    """Released or not, per lease; releases whose outcome was lost are remembered for a retry."""
    if set(map(type, replies)) <= {int} and (not replies or min(replies) >= 0):  # type: ignore[type-var,operator]
        return list(map(bool, replies))  # the usual case, in C-level passes: 1 + subscribers told, or 0
    lost = [i for i, reply in enumerate(replies) if reply is UNKNOWN or reply is NOT_SENT]
    if lost:
        now = time.monotonic()
        for i in lost:
            lease = leases[i]
            client._remember_cleanup(lease.key, lease.token, now + lease.ttl_ms / 1000.0)
        names = [leases[i].name for i in lost]
        raise OutcomeUnknownError(
            f"the connection failed mid-batch: the release of {len(names)} locks is unconfirmed "
            "and will be retried", names)
    for i, reply in enumerate(replies):
        if type(reply) is not int:
            raise item_error(replies, i, [lease.name for lease in leases])
    return [reply >= 1 for reply in replies]  # type: ignore[operator]


def extending(leases: Sequence[Lease], ttl_ms: int, sent_at: float) -> None:
    """Extends of ``leases`` to ``ttl_ms`` are about to be written (see ``lease.commands_sent``)."""
    if leases:
        commands_sent(leases, sent_at, leases[0].expiry_after(sent_at, ttl_ms))


def settle_extend(client: BulkClient, leases: Sequence[Lease], replies: list[object], ttl_ms: int,
                  sent_at: float) -> list[bool]:
    """Extended or not, per lease; an extended lease believes the earliest ttl that may have
    been set last (see ``lease``), one found not ours is lost."""
    if replies.count(1) == len(replies):  # the usual case: every one extended, no call per lease
        commands_ran(leases, sent_at, ttl_ms)
        if any(map(renewal_of, leases)):  # a C-level pass: a RenewalState is never falsy
            for lease in leases:
                if lease.renewal is not None:
                    client._renewer().rescheduled(lease)
        return [True] * len(leases)
    results = []
    unknown = []
    ran: list[Lease] = []
    refused: list[Lease] = []
    maybe: list[Lease] = []
    error: Exception | None = None
    for i, (reply, lease) in enumerate(zip(replies, leases, strict=True)):
        if reply is UNKNOWN or reply is NOT_SENT:
            unknown.append(lease.name)
            (maybe if reply is UNKNOWN else refused).append(lease)
            results.append(False)
        elif type(reply) is int:
            (ran if reply == 1 else refused).append(lease)
            results.append(reply == 1)
        else:
            refused.append(lease)
            results.append(False)
            if error is None:
                error = item_error(replies, i, [lease.name for lease in leases])
    commands_ran(ran, sent_at, ttl_ms)
    commands_refused(refused, sent_at)
    extends_unconfirmed(client, maybe, sent_at)
    for lease in ran:
        if lease.renewal is not None:
            client._renewer().rescheduled(lease)
    for lease, extended, reply in zip(leases, results, replies, strict=True):
        if not extended and reply == 0:
            client._lease_lost(lease, "an extend found its key gone or held by another token")
    if error is not None:
        raise error
    if unknown:
        raise OutcomeUnknownError(
            f"the connection failed mid-batch: {len(unknown)} extends are unconfirmed", unknown)
    return results


def settle_query(names: Sequence[str | bytes], replies: list[object]) -> list[LockInfo]:
    out = []
    for name, reply in zip(names, replies, strict=True):
        if type(reply) is not int:
            if reply is UNKNOWN or reply is NOT_SENT:
                raise ConnectionError(f"the connection failed mid-batch while querying {name!r}")
            raise reply_error(reply, name)
        out.append(info_from_pttl(reply))
    return out


class AcquirePlan:
    """One acquire_many, minus the sending: checked input, tokens made chunk by chunk while the
    server works on the previous chunk, the encoder, and leases built as replies arrive."""

    def __init__(self, names: Sequence[str | bytes], ttl_ms: int, tokens: Sequence[bytes] | None,
                 owner: object, core: Any, renewed: bool) -> None:
        """``core`` makes the leases; they are untracked by the cycle collector unless
        ``renewed`` or a name is of a subclass of str or bytes (one with a ``__dict__`` could
        point back at its lease: see ``ext/leases.pyx``) or str and bytes are mixed."""
        self.keys, plain = names_checked(names, core)
        self.names = list(names)
        self.ttl_ms = ttl_ms
        self.count = count = len(self.keys)
        self.fresh_tokens = tokens is None
        self.tokens = [b""] * count if tokens is None else check_tokens(tokens, count)
        self.owner = owner
        self.leases: list[Lease | None] = [None] * count
        self.not_acquired: list[str | bytes] = []
        self.not_durable: list[str | bytes] = []
        self.errors: list[int] = []
        self.handled = 0
        self.lost_from = count
        """The first item settled with no answer (``UNKNOWN``, ``NOT_SENT``): a Redis Cluster's or a
        Sentinel's executor hands every reply at once, the lost ones among them."""
        self.sent_at = 0.0
        self.script: _scripts.Script | None = None
        """``FENCED_ACQUIRE`` for a fenced acquire (each reply a fence), else None (``SET NX``)."""
        self.reloaded: list[int] = []
        self.give_back: Callable[[bytes, bytes, float], None] = _nothing
        """Where a batched call's maybe-taken locks go (``client._remember_cleanup``)."""
        self._given_back: set[int] = set()
        self.make_leases = lease_maker(core)
        self._core = core
        self.make_fenced: Any = None
        """``core``'s maker of fenced leases, once this is a fenced acquire."""
        self._untracked = untracked = plain and not renewed
        self.untrack: Callable[[list[Any], int, int], None] = (
            core.untrack if untracked else _untracked_nowhere)

    def fence(self, script: _scripts.Script, key_prefix: bytes, replicas_ack: int, fenced: object) -> None:
        """Make this a fenced acquire by ``script`` (the client's), after every name's checks (see
        ``check_fenced``)."""
        if check_fenced_keys(fenced, key_prefix, self.keys, replicas_ack):
            self.script = script
            self.make_fenced = lease_maker(self._core, FencedLease)

    # -- a fenced acquire on one server: one transaction per KEYS_PER_CALL keys (``transactions``) --

    def batched_calls(self) -> int:
        """How many script calls take every lock (the items the executor then counts)."""
        return len(call_sizes(self.count))

    def _call_range(self, call: int) -> tuple[int, int]:
        start = call * _scripts.KEYS_PER_CALL
        return start, min(self.count, start + _scripts.KEYS_PER_CALL)

    def encode_calls(self, buf: Any, start: int, stop: int) -> None:
        self.reencode_calls(buf, range(start, stop))

    def reencode_calls(self, buf: Any, calls: Sequence[int]) -> None:
        keys, tokens, ttl_ms = self.keys, self.tokens, self.ttl_ms
        for call in calls:
            first, last = self._call_range(call)
            if self.fresh_tokens:
                tokens[first:last] = batch_tokens(last - first)
            append_transaction(buf, keys[first:last], tokens[first:last], ttl_ms)

    def call_shape(self) -> Transactions:
        """What the calls answer: a transaction's replies, read as one per call."""
        return Transactions(call_sizes(self.count))

    def call_sizes(self, start: int, stop: int) -> list[int]:
        return call_sizes(self.count)[start:stop]

    def on_call_replies(self, start: int, replies: list[object]) -> None:
        """``on_replies`` for calls ``start``...: their locks' replies, one per lock."""
        self._give_back_failed_calls(start, replies)
        first = self._call_range(start)[0]
        self.on_replies(first, expand_calls(replies, self.call_sizes(start, start + len(replies))))

    def _give_back_failed_calls(self, start: int, replies: list[object]) -> None:
        """A call answered by one error (not NOSCRIPT: that one is sent again) may have stopped
        half-way, an error ends a script without undoing it: its locks go to ``give_back``, to be
        released with their tokens, as soon as the reply is read, whatever the call does next."""
        for call, reply in enumerate(replies, start):
            first, last = self._call_range(call)
            wrong_length = type(reply) is list and len(reply) != last - first  # not a Redis answer
            if (call_failed(reply) or wrong_length) and call not in self._given_back:
                self._given_back.add(call)
                forget_at = time.monotonic() + self.ttl_ms / 1000.0
                for i in range(first, last):
                    self.give_back(self.keys[i], self.tokens[i], forget_at)

    def call_orphans(self, start: int, stop: int) -> tuple[Any, ...]:
        """What calls ``start``..``stop`` may take, for a cancelled caller's protocol to release:
        keys, tokens, ttl and each call's size (``expand_calls`` reads its replies with them)."""
        first, last = self._call_range(start)[0], self._call_range(stop - 1)[1]
        return self.orphan_tag((self.keys[first:last], self.tokens[first:last], self.ttl_ms,
                                self.call_sizes(start, stop)))

    def orphans(self, start: int, stop: int) -> tuple[Any, ...]:
        """What items ``start``..``stop`` may take, for whoever releases it when the caller is gone."""
        return self.orphan_tag((self.keys[start:stop], self.tokens[start:stop], self.ttl_ms))

    def orphan_tag(self, tag: tuple[Any, ...]) -> tuple[Any, ...]:
        return OwnTokensTag(tag) if self.fresh_tokens else tag

    def expand(self, replies: list[object]) -> list[object]:
        """Every call's final replies (NOSCRIPT retries included), one per lock."""
        self._give_back_failed_calls(0, replies)
        return expand_calls(replies, self.call_sizes(0, len(replies)))

    def encode(self, buf: Any, start: int, stop: int) -> None:
        if self.script is not None:
            self.encode_indices(buf, range(start, stop))
        else:
            if self.fresh_tokens:
                self.tokens[start:stop] = batch_tokens(stop - start)
            buf.append_set_nx_px_many(self.keys[start:stop], self.tokens[start:stop], self.ttl_ms)

    def encode_indices(self, buf: Any, indices: Sequence[int]) -> None:
        """``encode`` for the items ``indices`` (a Redis Cluster master's share), in one call."""
        core = self._core
        items = indices if type(indices) is list else list(indices)
        keys = core.take_items(self.keys, items)
        if self.fresh_tokens:
            chunk_tokens = batch_tokens(1) * len(items)
            core.put_items(self.tokens, items, chunk_tokens)
        else:
            chunk_tokens = core.take_items(self.tokens, items)
        if self.script is not None:
            self.script.append_each(buf, keys, chunk_tokens, self.ttl_ms)
        else:
            buf.append_set_nx_px_many(keys, chunk_tokens, self.ttl_ms)

    def on_replies(self, start: int, replies: list[object]) -> None:
        stop = start + len(replies)
        names, tokens, leases = self.names, self.tokens, self.leases
        if replies.count(b"OK") == len(replies):  # the usual case, in C-level loops
            self.make_leases.make(leases, start, (names, tokens), start, stop - start,
                                  (self.ttl_ms, self.sent_at, self.owner), self._untracked)
        elif self.make_fenced is not None and set(map(type, replies)) == {int} and type(replies) is list:
            count = stop - start  # a fenced acquire's usual case: every lock granted, each reply its fence
            columns = (names[start:stop], tokens[start:stop], [self.ttl_ms] * count, [self.sent_at] * count,
                       [self.owner] * count, replies)
            self.make_fenced.make(leases, start, columns, 0, count, (), self._untracked)
        else:
            for i, reply in enumerate(replies, start):
                self._settle(i, reply)
            self.untrack(leases, start, stop)
        self.handled = stop

    def _settle(self, i: int, reply: object) -> None:
        if reply == b"OK":
            self.leases[i] = Lease(self.names[i], self.tokens[i], self.ttl_ms, self.sent_at,
                                   self.owner)
        elif type(reply) is int:  # a fenced acquire's fence
            self.leases[i] = FencedLease(self.names[i], self.tokens[i], self.ttl_ms,
                                         self.sent_at, self.owner, reply)
        elif reply is None:
            self.not_acquired.append(self.names[i])
        elif reply is UNKNOWN or reply is NOT_SENT:
            self.lost_from = min(self.lost_from, i)
        elif self.script is not None and type(reply) is ReplyError and reply.code == "NOSCRIPT":
            self.reloaded.append(i)  # sent again once the script is loaded: see ``settle_reloaded``
        elif reply is not NOT_DURABLE:  # those are settled by ``undurable``
            self.errors.append(i)

    def settle_reloaded(self, replies: list[object]) -> None:
        """Settle the items a chunk saw answered NOSCRIPT, from their replies once sent again
        (the executor retries them after loading the script). One whose retry got no answer
        (UNKNOWN, NOT_SENT) moves ``lost_from`` back to it: the call then goes the way of a broken
        connection, and such a lock is maybe held, never "not acquired"."""
        indices, self.reloaded = self.reloaded, []
        for i in indices:
            self._settle(i, replies[i])
        if indices:
            self.untrack(self.leases, indices[0], indices[-1] + 1)

    def undurable(self, replies: list[object]) -> list[tuple[str | bytes, bytes, bytes, float]]:
        """The locks granted that too few replicas acknowledged (``replicas_ack``): their leases
        are taken out of the result, their names listed in ``not_durable``; (name, key, token,
        forget_at) of each, to release."""
        indices = [i for i, reply in enumerate(replies) if reply is NOT_DURABLE]
        forget_at = time.monotonic() + self.ttl_ms / 1000.0
        for i in indices:
            self.leases[i] = None
        self.not_durable = [self.names[i] for i in indices]
        return [(self.names[i], self.keys[i], self.tokens[i], forget_at) for i in indices]

    def taken(self) -> list[Lease]:
        return [lease for lease in self.leases if lease is not None]

    def unanswered_from(self) -> int:
        """The first item with no answer, ``count`` when every item has one."""
        return min(self.handled, self.lost_from)

    def maybe_held(self, replies: list[object]) -> list[tuple[str | bytes, bytes, bytes, float]]:
        """(name, key, token, forget_at) of every lock sent whose reply was lost: it may hold
        until ``forget_at``, one ttl from now."""
        forget_at = time.monotonic() + self.ttl_ms / 1000.0
        return [(self.names[i], self.keys[i], self.tokens[i], forget_at)
                for i in range(self.unanswered_from(), self.count) if replies[i] is UNKNOWN]

    def not_sent(self, replies: list[object]) -> list[str | bytes]:
        return [self.names[i] for i in range(self.unanswered_from(), self.count) if replies[i] is NOT_SENT]

    def first_error(self, replies: list[object]) -> Exception:
        return item_error(replies, self.errors[0], self.names)


def _nothing(*_: object) -> None:
    pass


def _untracked_nowhere(objects: list[Any], start: int, stop: int) -> None:
    pass


_makers: dict[tuple[str, type[Lease]], Any] = {}


def lease_maker(core: Any, cls: type[Lease] = Lease) -> Any:
    """``core``'s maker of plain leases, or of ``FencedLease`` (their values: a plain lease's,
    then the fence), made once per core."""
    maker = _makers.get((core.IMPLEMENTATION, cls))
    if maker is None:
        values = LEASE_VALUES if cls is Lease else (*LEASE_VALUES, "fence")
        maker = _makers[(core.IMPLEMENTATION, cls)] = core.LeaseMaker(cls, values, LEASE_EMPTY)
    return maker


def expand_calls(replies: list[object], sizes: Sequence[int], succeeded: object = None) -> list[object]:
    """Per-lock replies from batched calls' replies: a call's list as it is (a fence, None when
    held, or that lock's own error), any other reply (an error for the whole call, ``UNKNOWN``,
    ``NOT_SENT``) once for each of its locks; a list of the wrong length (a server that is not
    Redis) as ``UNKNOWN`` for each, never shifted onto other locks. With ``succeeded``, the calls
    reply only what failed (``outcomes.failures``) and every other lock's reply is ``succeeded``."""
    out: list[object] = []
    for reply, size in zip(replies, sizes, strict=True):
        if type(reply) is not list:
            out.extend(repeat(reply, size))
        elif succeeded is None:
            out.extend(reply if len(reply) == size else repeat(UNKNOWN, size))
        else:
            failed = failures(reply, size)
            if failed is None:
                out.extend(repeat(UNKNOWN, size))
                continue
            first = len(out)
            out.extend(repeat(succeeded, size))
            for position, outcome in failed:
                out[first + position] = outcome
    return out


def call_failed(reply: object) -> bool:
    """A whole multi-key call answered by one error, other than NOSCRIPT (sent again)."""
    return type(reply) is ReplyError and reply.code != "NOSCRIPT"


OrphanTags = Callable[[int, int], Any]
"""The orphan tag of items ``start``..``stop`` of a bulk call: what they may take, for whoever
releases it when the caller is gone (a cancelled task, an interrupted thread)."""

OrphanHandler = Callable[[Any, object], None]
"""Takes an orphan tag and its chunk's reply (``UNKNOWN`` when none will be read)."""


def hand_over(on_orphan: OrphanHandler, orphans: OrphanTags, start: int, replies: list[object]) -> None:
    """Items ``start``.. answered ``replies`` that their caller will never settle (it was
    cancelled or interrupted): what they took goes to ``on_orphan``."""
    on_orphan(orphans(start, start + len(replies)), replies if len(replies) > 1 else replies[0])


def subset_orphans(orphans: OrphanTags, indices: Sequence[int]) -> OrphanTags:
    """The orphan tags of items sent again apart from the rest (a NOSCRIPT retry's, a Redis
    Cluster master's share, a Sentinel's resend): their item ``k`` is the call's ``indices[k]``."""
    def tags(start: int, stop: int) -> Any:
        return join_orphan_tags([orphans(i, i + 1) for i in indices[start:stop]])
    return tags


class OwnTokensTag(tuple[Any, ...]):
    """An orphan tag whose tokens this client made: what its items may have taken is released
    again when found free (``CleanupBook.remember``'s ``recheck``)."""

    __slots__ = ()


def release_orphan(remember: Callable[[bytes, bytes, float, bool], None], tag: tuple[Any, ...],
                   reply: object) -> None:
    """An acquire's reply came (or was lost) after its caller stopped waiting: every lock it
    took, or may have taken, goes to ``remember`` (the client's maybe-held cleanup)."""
    keys, tokens, ttl = tag[:3]
    forget_at = time.monotonic() + ttl / 1000.0
    recheck = type(tag) is OwnTokensTag
    if type(keys) is bytes:
        if reply is UNKNOWN or reply == b"OK" or type(reply) is int:  # an int: a fenced acquire's fence
            remember(keys, tokens, forget_at, recheck)
        return
    for key, token, one in zip(keys, tokens, orphan_replies(tag, reply), strict=True):
        if one is UNKNOWN or one == b"OK" or type(one) is int:
            remember(key, token, forget_at, recheck)


def raw_replies_tag(tag: tuple[Any, ...]) -> tuple[Any, ...]:
    """The orphan tag of transactions (``call_orphans``') whose replies come unfolded (an asyncio
    protocol's, for a cancelled caller): ``orphan_replies`` folds them first."""
    raw = (*tag, True)
    return OwnTokensTag(raw) if type(tag) is OwnTokensTag else raw


def join_orphan_tags(tags: Sequence[tuple[Any, ...]]) -> tuple[Any, ...]:
    """One orphan tag for the items of ``tags`` sent together (a NOSCRIPT retry's chunk):
    ``(keys, tokens, ttl)``, or with batched calls' sizes after them."""
    keys = [key for tag in tags for key in tag[0]]
    tokens = [token for tag in tags for token in tag[1]]
    if len(tags[0]) > 3:
        joined: tuple[Any, ...] = (keys, tokens, tags[0][2], [size for tag in tags for size in tag[3]])
    else:
        joined = (keys, tokens, tags[0][2])
    return OwnTokensTag(joined) if all(type(tag) is OwnTokensTag for tag in tags) else joined


def orphan_replies(tag: tuple[Any, ...], reply: object) -> list[object]:
    """One reply per lock of an orphan tag, from what its chunk got: a reply per item (one
    item: that reply alone), or ``UNKNOWN`` for all."""
    keys = tag[0]
    if reply is UNKNOWN:
        return [UNKNOWN] * len(keys)
    if len(tag) > 3:  # batched calls: a list per call; one that failed whole may have taken some
        sizes = tag[3]
        if len(tag) > 4:  # a transaction's every reply (``raw_replies_tag``)
            calls: list[object] = fold_transactions(reply, sizes)  # type: ignore[arg-type]
        else:
            calls = reply if len(sizes) > 1 else [reply]  # type: ignore[assignment]
        return expand_calls([UNKNOWN if call_failed(one) else one for one in calls], sizes)
    return [reply] if len(keys) == 1 else reply  # type: ignore[return-value]


OnReplies = Callable[[int, list[object]], None]
