"""The typed error hierarchy. Every error turbolock raises derives from ``LockError``.

Messages name the lock and the argument at fault, never a token or a password. An error about
particular locks lists their names in ``names`` (never their tokens).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any

Names = Iterable[str | bytes]
"""Lock names as an error takes them; ``.names`` is always a list."""


def _names_list(names: Names | None) -> list[str | bytes]:
    if names is None:
        return []
    if isinstance(names, str | bytes):
        return [names]
    return names if type(names) is list else list(names)  # a bulk call's list is kept, not copied


class LockError(Exception):
    """Root of every error raised by turbolock; ``names`` lists the locks it is about, if any."""

    names: list[str | bytes]

    def __init__(self, *args: object, names: Names | None = None) -> None:
        super().__init__(*args)
        self.names = _names_list(names)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from ``args`` and the attributes, without calling an ``__init__`` whose
        # parameters differ from ``args``: errors cross process boundaries intact.
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls: type[LockError], args: tuple[object, ...], state: dict[str, Any]) -> LockError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class InvalidArgumentError(LockError, ValueError):
    """An argument has a value turbolock refuses; ``argument`` names it.

    Raised before anything is sent to Redis.
    """

    def __init__(self, argument: str, message: str, *, names: Names | None = None) -> None:
        super().__init__(f"{argument}: {message}", names=names)
        self.argument = argument


class InvalidArgumentTypeError(LockError, TypeError):
    """An argument has a type turbolock refuses; ``argument`` names it.

    Raised before anything is sent to Redis.
    """

    def __init__(self, argument: str, message: str, *, names: Names | None = None) -> None:
        super().__init__(f"{argument}: {message}", names=names)
        self.argument = argument


class ConnectionError(LockError, builtins.ConnectionError):  # noqa: A001 - public name by design
    """The server could not be reached, or the connection broke during a call."""


class ClientClosedError(ConnectionError):
    """The client is closed (``close()`` ran, or is running): the call cannot go through it, and
    a blocking acquire stops waiting at once. Locks an acquire took as the client closed are
    neither renewed nor released by it: they expire by their ttl."""

    def __init__(self, *args: object, names: Names | None = None) -> None:
        super().__init__(*(args or ("the client is closed",)), names=names)


class TimeoutError(ConnectionError, builtins.TimeoutError):  # noqa: A001 - public name by design
    """A call did not complete within its deadline."""


class UnsentTimeoutError(TimeoutError):
    """A call's deadline passed before it wrote anything (it waited for a busy pool's
    connection, or was late already when it had one): the server had no part in it, so nothing
    is maybe held and the server is not to blame (a Sentinel's master is not forgotten)."""


class SlotMovingError(TimeoutError):
    """A Redis Cluster slot answered TRYAGAIN until the call's deadline: it is being moved and a
    node holds only some of the call's keys (a fenced or fair lock's own keys). Nothing was done;
    a blocking acquire waits on through it, as through a lock someone holds."""


class AuthenticationError(ConnectionError):
    """The server refused the credentials (the password is never part of the message)."""


class ProtocolError(ConnectionError):
    """The server sent bytes that are not valid RESP2; the connection is discarded."""


class OutcomeUnknownError(ConnectionError):
    """Commands were sent but their replies never came; ``names`` lists the locks affected."""

    def __init__(self, message: str, names: Names | None = None) -> None:
        super().__init__(message, names=names)


class AcquireOutcomeUnknownError(OutcomeUnknownError):
    """An acquire was sent but its reply never came: the lock may have been taken.

    turbolock treats the names as "maybe held" and releases them with the tokens it sent,
    at once if it can and otherwise as soon as a connection works again; ``cleaned_up``
    says whether that release has already been done. For a bulk acquire, ``acquired`` holds
    the leases whose replies did arrive (still held, and auto-renewed when the acquire asked
    for it: release or keep them) and ``not_sent``
    the names never sent.
    """

    def __init__(self, message: str, names: Names | None = None, cleaned_up: bool = False,
                 acquired: list[Any] | None = None, not_sent: list[str | bytes] | None = None) -> None:
        super().__init__(message, names)
        self.cleaned_up = cleaned_up
        self.acquired = acquired if acquired is not None else []
        self.not_sent = not_sent if not_sent is not None else []


class StaleFenceError(LockError):
    """A fenced resource refused an operation: a newer holder of the lock (a higher fence) has
    been there since this lease was granted. Drop the work; the lock was lost."""


class NotDurableError(LockError):
    """The master granted the lock, but fewer replicas than ``replicas_ack`` acknowledged it
    within ``replicas_timeout``: a failover now could lose it and grant it to someone else. It
    is not yours; it was released with its token (in the background). ``names`` lists the locks."""


class ResponseError(LockError):
    """The server answered a command with an error (WRONGTYPE, OOM, READONLY, NOPERM...)."""

    def __init__(self, message: str, code: str = "", *, names: Names | None = None) -> None:
        super().__init__(message, names=names)
        self.code = code


class FencedWriteError(ResponseError):
    """``FencedStore.write_many``: the server refused some items with an error (a key holding
    another type: WRONGTYPE...); the others went through. ``written`` has one flag per item in
    input order (True: written; False: refused by its fence, or by this error); ``names`` lists
    the keys of the items the server refused."""

    def __init__(self, message: str, code: str, *, names: Names, written: list[bool]) -> None:
        super().__init__(message, code, names=names)
        self.written = written


class LockNotOwnedError(LockError):
    """A release or extend found the lock no longer ours (expired, or someone else's)."""


class LockNotAcquiredError(LockError):
    """A blocking acquire gave up when its timeout passed (the context manager raises it)."""


class LockLostError(LockError):
    """The lock is no longer held: its renewal failed, it expired, or its key was taken over."""


class LockUsageError(LockError, RuntimeError):
    """A Lock object was used out of order: acquired twice, or released while not held."""


QUOTED_ARGUMENTS = ", with args beginning with:"
"""Where an error reply starts quoting the command's arguments back."""


class ReplyError(Exception):
    """An error reply as the core parser returns it (a value in a batch, not raised).

    Client code turns it into ``ResponseError`` where an error reply is not expected.
    """

    @property
    def code(self) -> str:
        """The error's first word, e.g. ``NOSCRIPT`` or ``WRONGTYPE``."""
        message = str(self.args[0]) if self.args else ""
        return message.split(" ", 1)[0]

    def __str__(self) -> str:
        # Without the arguments Redis quotes back ("ERR unknown command 'SET', with args beginning
        # with: 'key' 'token' ..." where an operator renamed a command): a lock's token, or a
        # password, must never reach an error message or a log through a reply's text.
        message = str(self.args[0]) if self.args else ""
        quoted = message.find(QUOTED_ARGUMENTS)
        return message if quoted == -1 else message[:quoted] + " (its arguments not shown)"

    def __repr__(self) -> str:
        return f"ReplyError({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.args == self.args

    def __hash__(self) -> int:
        return hash(self.args)


class ClusterError(ConnectionError):
    """A Redis Cluster could not serve the call: no node gave a slot map, a slot has no master
    (the cluster is down or being changed), or a key's redirects never ended."""


class QuorumError(ConnectionError):
    """Too many Redlock masters failed to answer for a call to be decided; ``names`` lists the locks.

    For an acquire (NoQuorum) ``result`` says what the masters answered, as counts, and the lock
    was released again wherever it may have been taken. For a release or extend the outcome is
    unconfirmed; releases are retried on those masters when they answer again.
    """

    def __init__(self, message: str, names: Names | None = None, result: Any = None) -> None:
        super().__init__(message, names=names)
        self.result = result


class RedlockNotAcquiredError(LockNotAcquiredError):
    """A blocking Redlock acquire gave up; ``result`` holds the last attempt's status and counts."""

    def __init__(self, message: str, result: Any = None, *, names: Names | None = None) -> None:
        super().__init__(message, names=names)
        self.result = result


class ExtensionLimitError(LockError):
    """A lease was extended as many times as its ``max_extensions`` allows; it was not extended."""
