"""Redis Sentinel, written once for threads and asyncio: which server is the master of a service
now, as the Sentinels say, and when to ask them again.

The master's address is asked of the Sentinels in turn (``SENTINEL get-master-addr-by-name``)
when a connection is to be opened and none is known, and forgotten when a call to it fails or it
answers ``READONLY`` (a failover demoted it). A new connection asks ``ROLE`` before it is used,
so a Sentinel that has not yet seen a failover cannot send the client to a replica: the
Sentinel whose answer passed that check is asked first from then on, and one whose answer
failed it is asked last (a stale Sentinel listed first would otherwise be believed for ever).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from turbolock._flows.asking import turn_deadline
from turbolock._flows.bulk_plan import OrphanHandler, OrphanTags, subset_orphans
from turbolock._flows.steps import Call, CallStep, Flow
from turbolock._wire.outcomes import (
    NOT_SENT,
    UNKNOWN,
    DroppedConnectionError,
    Encoder,
    Reencoder,
    Unconfirmed,
    subset_encoders,
)
from turbolock._wire.replies import reply_error
from turbolock._wire.slot_map import Address
from turbolock.errors import (
    AuthenticationError,
    ClientClosedError,
    ConnectionError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockError,
    ReplyError,
    ResponseError,
    UnsentTimeoutError,
)
from turbolock.options import ConnectionOptions, node_address

GET_MASTER = b"get-master-addr-by-name"


def readonly(reply: object) -> bool:
    """A write refused by a replica: the server the client took for the master no longer is."""
    return type(reply) is ReplyError and reply.code == "READONLY"


def check_role(reply: object, address: Address, service: str) -> None:
    """Raise unless ``reply`` (to ``ROLE``) says master. A user not allowed ``ROLE`` (NOPERM) is
    trusted to have been sent to the master."""
    if type(reply) is ReplyError and reply.code == "NOPERM":
        return
    if type(reply) is list and reply and reply[0] == b"master":
        return
    role = reply[0].decode(errors="replace") if type(reply) is list and reply and type(reply[0]) is bytes \
        else "no answer to ROLE"
    raise ConnectionError(f"{address[0]}:{address[1]} is not the master of {service!r} ({role}); "
                          "a failover is under way")


CHECK_INTERVAL = 1.0
"""Seconds between two questions to the Sentinels while connections are open. A failover the
client does not see fail (``SENTINEL FAILOVER``, or a partition) leaves the old master taking
writes until the Sentinels demote it, about 10 s later: locks taken there meanwhile are lost
and may be granted on the new master too. Asking every second narrows that to about a second."""


class SentinelRoutes:
    """The master a client believes, and the Sentinels to ask when it has none."""

    def __init__(self, service: str, sentinels: Sequence[Address]) -> None:
        self.service = service
        self.sentinels = list(sentinels)
        self.master: Address | None = None
        self.named_by: tuple[Address, Address] | None = None
        """The last answer taken: (the Sentinel, the master it named)."""

    def forget(self) -> None:
        """The master failed or refused a write: ask the Sentinels before the next connection."""
        self.master = None

    def answered(self, sentinel: Address, reply: object) -> Address | None:
        """The master from one Sentinel's reply (None when it does not know the service)."""
        if type(reply) is not list or len(reply) != 2:
            return None
        host, port = reply
        if type(host) is not bytes or type(port) is not bytes or not port.isdigit():
            return None
        self.master = (host.decode(), int(port))
        self.named_by = (sentinel, self.master)
        return self.master

    def confirmed(self, address: Address) -> None:
        """A connection to ``address`` passed the ``ROLE`` check: the Sentinel that named it is
        asked first from now on."""
        self._move(address, 0)

    def refused(self, address: Address) -> None:
        """A connection to ``address`` failed, or it is not the master: the Sentinel that named
        it is asked last from now on."""
        self._move(address, len(self.sentinels))

    def unanswered(self, sentinel: Address) -> None:
        """``sentinel`` could not be asked (no connection, no answer in time): it is asked last
        from now on, so the next call does not wait for it first again."""
        self._put(sentinel, len(self.sentinels))

    def _move(self, address: Address, position: int) -> None:
        """The Sentinel that named ``address`` goes to ``position``."""
        named_by = self.named_by
        if named_by is not None and named_by[1] == address:
            self._put(named_by[0], position)

    def _put(self, sentinel: Address, position: int) -> None:
        if sentinel in self.sentinels:
            self.sentinels.remove(sentinel)
            self.sentinels.insert(position, sentinel)


def master_flow(routes: SentinelRoutes, sentinels: Any, deadline: float) -> Flow[Address]:
    """The master's address: the one known, or ``ask_flow``'s."""
    if routes.master is not None:
        return routes.master
    return (yield from ask_flow(routes, sentinels, deadline))


def open_master_flow(routes: SentinelRoutes, ask: Callable[[float], Any],
                     open_checked: Callable[[Address, float], Any], deadline: float) -> Flow[Any]:
    """A new connection to the master: ``open_checked(address, deadline)`` connects and checks
    ``ROLE`` (and makes the client forget the master when either fails), to the master believed
    or else to the one ``ask(deadline)`` gets from the Sentinels. When the master believed
    refuses (a failover this client has not seen yet: it is down, or a replica now), the
    Sentinels are asked again within the same deadline, and a master they name instead is tried:
    the call goes on there rather than failing while they already know the new one. So does a
    master a Sentinel named just now that refuses (a stale Sentinel, asked last from then on)."""
    believed = routes.master
    address = believed if believed is not None else (yield Call(ask, (deadline,)))
    try:
        conn = yield Call(open_checked, (address, deadline))
    except Exception as refused:
        routes.refused(address)
        try:
            named = yield Call(ask, (deadline,))
        except Exception:
            raise refused from None
        if named == address:
            raise refused from None
        conn = yield Call(open_checked, (named, deadline))
        address = named
    routes.confirmed(address)
    return conn


def ask_flow(routes: SentinelRoutes, sentinels: Any, deadline: float) -> Flow[Address]:
    """The master's address, asked of the Sentinels in turn (``sentinels.node(address)`` is a
    Sentinel's ``Server``) until one knows it."""
    errors: list[str] = []
    refused = denied = False
    order = list(routes.sentinels)
    for position, sentinel in enumerate(order):
        try:
            reply = yield Call(sentinels.node(sentinel).command_one,
                               ((b"SENTINEL", GET_MASTER, routes.service.encode()),
                                turn_deadline(deadline, position, len(order))))
        except ClientClosedError:
            raise  # the client closed under the call: no other Sentinel will do
        except LockError as exc:
            routes.unanswered(sentinel)
            refused = refused or isinstance(exc, AuthenticationError)
            errors.append(f"{sentinel[0]}:{sentinel[1]}: {exc}")
            continue
        address = routes.answered(sentinel, reply)
        if address is not None:
            return address
        if type(reply) is ReplyError and reply.code == "NOPERM":
            denied = True
            errors.append(f"{sentinel[0]}:{sentinel[1]} refused the question ({reply})")
            continue
        errors.append(f"{sentinel[0]}:{sentinel[1]} knows no master named {routes.service!r}"
                      + (f" ({reply})" if type(reply) is ReplyError else ""))
    # Configuration errors, not an outage: a blocking acquire does not wait them out.
    if refused:
        raise AuthenticationError(f"no Sentinel gave the master of {routes.service!r}, and some refused the "
                                  f"credentials (sentinel_username, sentinel_password): {'; '.join(errors)}")
    if denied:
        raise ResponseError(f"no Sentinel gave the master of {routes.service!r}, and some refused the "
                            "Sentinel user the question (grant +sentinel|get-master-addr-by-name): "
                            f"{'; '.join(errors)}", "NOPERM")
    raise ConnectionError(f"no Sentinel gave the master of {routes.service!r}: {'; '.join(errors)}")


def refused_write(service: str) -> ConnectionError:
    return ConnectionError(f"the master of {service!r} refused a write (READONLY): a failover is under way")


def guarded_flow(pool: Any, step: CallStep, deadline: float) -> Flow[object]:
    """One call to the master (``step``). A failure makes ``pool`` forget the master and drop its
    connections (not one the caller brought on: see ``blames_master``); a write refused with
    READONLY (it did not run) goes once more, to the master the Sentinels name next, as does
    one a connection dropped on a master change refused before writing it."""
    for attempt in range(2):
        started = time.monotonic()
        try:
            reply = yield step
        except DroppedConnectionError:
            if attempt or time.monotonic() >= deadline:
                raise
            continue  # the pool has moved on: the next connection goes to the master used now
        except BaseException as exc:
            if blames_master(exc, deadline - started, pool.options.timeout):
                pool.master_failed()
            raise
        if not readonly(reply):
            return reply
        pool.master_failed()
        if time.monotonic() >= deadline:
            break
    raise refused_write(pool.routes.service)


CUT_SHORT = 0.9
"""A call given less than this share of a call timeout was cut short (a blocking acquire's last
attempt, cut to what was left of its wait); a whole call's is a little less than a timeout too,
by the time between its deadline's making and its start."""


def blames_master(exc: BaseException, given: float, call_timeout: float) -> bool:
    """Whether a call's failure says the master may be gone: not an interrupt or a cancelled
    task, nor a timeout of a call that was cut short (see ``CUT_SHORT``) or that never reached
    the master (``UnsentTimeoutError``)."""
    cause = exc.cause if isinstance(exc, Unconfirmed) else exc
    if not isinstance(cause, Exception) or isinstance(cause, UnsentTimeoutError):
        return False
    return not (isinstance(cause, TimeoutError) and given < CUT_SHORT * call_timeout)


Send = Callable[[int, Encoder, "Reencoder | None", "Sequence[int] | None"], CallStep]
"""``send(count, encode, reencode, indices)``: the items, or (``indices``) the original items
these are, resent."""
"""``send(count, encode, reencode)``: the step of a pipelined call of ``count`` items to the master."""


def guarded_many_flow(pool: Any, send: Send, count: int, encode: Encoder, reencode: Reencoder | None,
                      abandon: Callable[[list[object], Sequence[int]], None],
                      read_only: bool = False) -> Flow[list[object]]:
    """A pipelined call to the master; items refused with READONLY, or never sent (a connection to
    a master being replaced refuses what it has not written), go once more, to the master the
    Sentinels name next. That resend failing leaves them ``UNKNOWN`` (maybe held: the caller
    cleans them up; a read, ``read_only``, raises its error) and keeps the first send's replies;
    interrupted, it hands those replies to ``abandon(results, resent)`` (what they took goes to
    the orphan handler) first."""
    timeout = pool.options.timeout
    try:
        results: list[object] = yield send(count, encode, reencode, None)
    except BaseException as exc:
        if blames_master(exc, timeout, timeout):  # a cancelled task's call says nothing of the master
            pool.master_failed()
        raise
    refused = [i for i, reply in enumerate(results) if reply is NOT_SENT or readonly(reply)]
    if refused or UNKNOWN in results:
        pool.master_failed()
    if refused:
        try:
            again: list[object] = yield send(len(refused), *subset_encoders(encode, reencode, refused),
                                             refused)
        except Exception:
            pool.master_failed()
            if read_only:
                raise
            again = [UNKNOWN] * len(refused)
        except BaseException:
            abandon(results, refused)
            raise
        for position, i in enumerate(refused):
            results[i] = again[position]
    return results


def abandon_answered(on_orphan: OrphanHandler | None, orphans: OrphanTags | None) -> Callable[
        [list[object], Sequence[int]], None]:
    """``guarded_many_flow``'s ``abandon``: the first send's replies but the resent ones go to
    ``on_orphan`` (an acquire's locks, released in the background), when there is one."""
    def abandon(results: list[object], resent: Sequence[int]) -> None:
        if on_orphan is None or orphans is None:
            return
        skipped = set(resent)
        kept = [i for i in range(len(results)) if i not in skipped]
        if kept:
            replies = [results[i] for i in kept]
            tag = subset_orphans(orphans, kept)(0, len(kept))
            on_orphan(tag, replies if len(replies) > 1 else replies[0])
    return abandon


def check_sentinels(sentinels: object, service_name: object) -> list[Address]:
    """The Sentinels' addresses, refusing bad arguments before anything is sent."""
    if isinstance(sentinels, str | bytes) or not isinstance(sentinels, Sequence):
        raise InvalidArgumentTypeError("sentinels", "must be a list of URLs or (host, port) pairs")
    if not sentinels:
        raise InvalidArgumentError("sentinels", "must name at least one Sentinel")
    if not isinstance(service_name, str):
        raise InvalidArgumentTypeError("service_name", "must be a str (the name Sentinels monitor)")
    if not service_name.strip():
        raise InvalidArgumentError("service_name", "must not be empty")
    try:
        service_name.encode()
    except UnicodeEncodeError:  # else each call's ask of the Sentinels raised it, untyped
        raise InvalidArgumentError("service_name", "must be encodable as UTF-8") from None
    return [node_address(node, "sentinels") for node in sentinels]


class SentinelRules:
    """What the threaded and the asyncio Sentinel clients add to their single-server bases."""

    _service: str
    _sentinel_addresses: list[Address]
    _sentinel_credentials: tuple[str | None, str | None]
    _pool: Any
    key_prefix: bytes
    implementation: str
    options: ConnectionOptions

    def _take_sentinels(self, sentinels: object, service_name: object, username: str | None,
                        password: str | None, connection: dict[str, Any]) -> Address:
        """Check and keep the Sentinel arguments (before anything is sent); the address the
        client's own options carry until a Sentinel names the master. ``connection``: the
        master's keyword arguments, which cannot give its address."""
        for argument in ("host", "port"):
            if argument in connection:
                raise InvalidArgumentTypeError(argument, "unexpected keyword argument: the master's address "
                                                         "is the one the Sentinels name")
        self._sentinel_addresses = check_sentinels(sentinels, service_name)
        assert isinstance(service_name, str)
        for value, argument in ((username, "sentinel_username"), (password, "sentinel_password")):
            if value is not None and not isinstance(value, str):  # else named as the master's own
                raise InvalidArgumentTypeError(argument, f"must be str, not {type(value).__name__}")
        if username and password is None:  # else dropped: the Sentinels' default user
            raise InvalidArgumentError("sentinel_username", "comes without sentinel_password (a nopass user "
                                                            "takes any: sentinel_password='')")
        self._service = service_name
        self._sentinel_credentials = (username, password)
        return self._sentinel_addresses[0]

    def _sentinel_options(self) -> ConnectionOptions:
        """The Sentinels' connection options: the master's, with the Sentinels' credentials."""
        username, password = self._sentinel_credentials
        options = self.options
        if options.unix_socket_path is not None:
            raise InvalidArgumentError("unix_socket_path", "a master Sentinel names is reached over TCP")
        return dataclasses.replace(options, username=username, password=password, db=0, replicas_ack=0)

    def _refused(self, reply: object, name: str | bytes) -> LockError:
        if readonly(reply):  # an acquire sent to a master a failover demoted
            self._pool.master_failed()
            return refused_write(self._service)
        return reply_error(reply, name)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Any:
        raise InvalidArgumentError("url", "a Sentinel client is made from its Sentinels: "
                                          f"{cls.__name__}(sentinels, service_name, ...)")

    @classmethod
    def from_redis(cls, redis_client: Any, **kwargs: Any) -> Any:
        raise InvalidArgumentError("redis_client", "a Sentinel client is made from its Sentinels: "
                                                   f"{cls.__name__}(sentinels, service_name, ...)")

    def __repr__(self) -> str:
        sentinels = ", ".join(f"{host}:{port}" for host, port in self._sentinel_addresses)
        return (f"{type(self).__name__}({self._service!r} via [{sentinels}], db={self.options.db}, "
                f"key_prefix={self.key_prefix!r}, core={self.implementation!r})")
